#!/bin/sh
# GPU check: the WebGPU conformance suite, the whole-model GPU-vs-CPU test
# and the k3-mini decode benchmark, built here and run on a machine with a
# real GPU (no Go toolchain or network needed there).
#
# Usage
#   scripts/gpu-check.sh build [DIR]   # here: go test -c the wgsl package into
#                                      # DIR (default bin/gpu-check) and fetch
#                                      # the Vulkan loader .deb (apt-get download)
#   scripts/gpu-check.sh run [DIR]     # there: run everything from DIR
#
# With the device tool (DIR under the ignored bin/, so carry it):
#   scripts/gpu-check.sh build
#   run(command="scripts/gpu-check.sh run", carry=["bin/gpu-check"], timeout_s=540)
#
# `run` unpacks the loader if libvulkan.so.1 is missing, points the Vulkan
# loader at the NVIDIA ICD when present (VK_DRIVER_FILES / VK_ICD_FILENAMES),
# prints the adapter (a silent fallback to lavapipe/llvmpipe fails the run
# unless ALLOW_CPU_ADAPTER=1), then runs, each with a time limit:
#   1. TestConformance, TestConformanceGridSplit, TestReadback*   (~1 min)
#   2. TestRunnerMatchesCPU (k3-nano, kimi-linear-nano vs core/model) (~1 min)
#   3. `tessera bench --backend gpu` on a random k3-mini (BF16): prefill,
#      decode, device copy bandwidth and roofline, dispatches per token, GPU
#      memory, as JSON ($OUT/bench-gpu.json)                          (~2 min)
#   4. the PyTorch eager peer on CUDA on the same checkpoint when torch with
#      CUDA is installed there (models/reference/bench_torch.py --device
#      cuda; $OUT/bench-torch-cuda.json), and the ratio               (~2 min)
#   5. expert streaming: `tessera bench --gpu-memory 100%,50%,25%` and
#      `--n-cpu-moe 99` on the same checkpoint ($OUT/bench-experts*.json)
#                                                                     (~1 min)
#   6. BenchmarkRunnerPrefill on k3-mini: 64-token pieces with the routed
#      experts grouped by expert (the default) and per slot          (~2 min)
#   6. the llama.cpp Vulkan peer (@node-llama-cpp/linux-x64-vulkan@3.22.1,
#      every layer offloaded) against tessera's WebGPU backend on the same
#      adapter and the same F16 GGUF of that k3-mini: prefill 64/512,
#      decode 64, medians of 3 alternating ($OUT/bench-vulkan.json)  (~2 min)
# Total under 10 minutes. `build` needs the Vulkan peer fetched
# (scripts/peers/fetch.sh vulkan); the binaries are stripped and the
# libraries packed with xz so the carry stays under 64 MiB. Results go to stdout and, when $OUT is set
# (the device tool), to $OUT/gpu-check.log.
set -eu
mode=${1:-}
dir=${2:-bin/gpu-check}
case "$mode" in
build)
	mkdir -p "$dir"
	go test -c -ldflags='-s -w' -o "$dir/wgsl.test" ./wgsl
	go build -ldflags='-s -w' -o "$dir/tessera" ./cmd/tessera
	go build -ldflags='-s -w' -o "$dir/tessera-peer" ./cmd/tessera-peer
	scripts/peers/fetch.sh vulkan
	vk="${TESSERA_PEER_CACHE:-testdata/peers/cache}/node-llama-cpp-linux-x64-vulkan-3.22.1"
	# The Vulkan build, its base libraries and the common CPU variants
	# (ggml picks one for the host's CPU).
	tar -C "$vk" -cJf "$dir/llama-vulkan.tar.xz" LICENSE libggml-vulkan.so libggml.vulkan.v0.5.0.so \
		libllama.vulkan.v0.5.0.so libllama-common.so libggml-base.so libggml-cpu-x64.so libggml-cpu-haswell.so \
		libggml-cpu-skylakex.so libggml-cpu-icelake.so libggml-cpu-zen4.so libggml-cpu-sapphirerapids.so
	(cd "$dir" && rm -f ./*.deb && apt-get download libvulkan1 >/dev/null 2>&1) ||
		echo "gpu-check: could not download libvulkan1 (fine if the GPU machine has the loader)" >&2
	ls -la "$dir"
	;;
run)
	test -x "$dir/wgsl.test" || { echo "gpu-check: $dir/wgsl.test missing: run '$0 build' first" >&2; exit 1; }
	log=/dev/null
	if [ -n "${OUT:-}" ]; then log="$OUT/gpu-check.log"; fi
	if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1'; then
		for deb in "$dir"/*.deb; do
			[ -f "$deb" ] || continue
			echo "gpu-check: unpacking $deb"
			if [ "$(id -u)" = 0 ]; then dpkg -x "$deb" / && ldconfig; else
				mkdir -p "$dir/root" && dpkg -x "$deb" "$dir/root"
				LD_LIBRARY_PATH="$(cd "$dir/root" && pwd)/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
				export LD_LIBRARY_PATH
			fi
		done
	fi
	for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
		/etc/vulkan/icd.d/nvidia_icd.json; do
		if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
			export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
		fi
	done
	echo "gpu-check: VK_DRIVER_FILES=${VK_DRIVER_FILES:-unset}" | tee -a "$log"
	export CI=true XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
	t="$(cd "$dir" && pwd)/wgsl.test"
	# The tests read ../docs relative to the package only when regenerating
	# the support matrix; run from the package directory anyway.
	cd "$(dirname "$0")/../../wgsl" 2>/dev/null || cd "$dir"
	adapter=$(timeout 60 "$t" -test.run 'TestConformance$/Add/F32/1$' -test.v 2>&1 | grep 'GPU adapter' || true)
	echo "gpu-check: $adapter" | tee -a "$log"
	case "$adapter" in
	*llvmpipe* | *lavapipe* | *SwiftShader* | "")
		if [ "${ALLOW_CPU_ADAPTER:-0}" != 1 ]; then
			echo "gpu-check: no real GPU adapter (set ALLOW_CPU_ADAPTER=1 to run anyway)" | tee -a "$log"
			exit 1
		fi ;;
	esac
	rc=0
	echo "== conformance" | tee -a "$log"
	timeout 180 "$t" -test.run 'TestConformance|TestReadback' -test.count=1 2>&1 | tail -20 | tee -a "$log" || rc=1
	echo "== whole model vs CPU" | tee -a "$log"
	timeout 180 "$t" -test.run 'TestRunnerMatchesCPU' -test.count=1 -test.v 2>&1 |
		grep -E '^(---|    ---|PASS|FAIL|ok)|worst|Error|error' | tee -a "$log" || rc=1
	preset=${GPU_CHECK_PRESET:-k3-mini} # k3-nano for a quick try on lavapipe
	echo "== tessera bench --backend gpu ($preset BF16)" | tee -a "$log"
	tb="$(dirname "$t")/tessera"
	mdir=$(mktemp -d)/$preset
	res=${OUT:-$(dirname "$mdir")}
	timeout 120 "$tb" init-random --config "$preset" --dtype bf16 --out "$mdir" >/dev/null 2>&1 || rc=1
	timeout 180 "$tb" bench --model "$mdir" --backend gpu --prompt-len 64 --gen 64 --repeats 3 \
		--json "$res/bench-gpu.json" 2>&1 | tee -a "$log" || rc=1
	echo "== PyTorch eager on CUDA (same checkpoint)" | tee -a "$log"
	ref="$(cd "$(dirname "$0")/.." && pwd)/models/reference/bench_torch.py"
	if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
		timeout 180 python3 "$ref" --model "$mdir" --prompt-len 64 --gen 64 --repeats 3 --device cuda \
			--json "$res/bench-torch-cuda.json" 2>&1 | tee -a "$log" || rc=1
		python3 - "$res/bench-gpu.json" "$res/bench-torch-cuda.json" <<'PY' 2>&1 | tee -a "$log" || true
import json, sys
t, p = (json.load(open(f)) for f in sys.argv[1:3])
print("tessera GPU / PyTorch eager CUDA: prefill %.2fx, decode %.2fx" % (
    t["prefill_tok_per_s"] / p["prefill_tok_per_s"], t["decode_tok_per_s"] / p["decode_tok_per_s"]))
PY
	else
		echo "gpu-check: no PyTorch with CUDA on this machine; peer comparison skipped" | tee -a "$log"
	fi
	echo "== expert streaming ($preset BF16): GPU memory 100/50/25 % of the experts, then all on the CPU" | tee -a "$log"
	timeout 150 "$tb" bench --model "$mdir" --backend gpu --gpu-memory 100%,50%,25% --prompt-len 64 --gen 64 --repeats 2 \
		--json "$res/bench-experts.json" 2>&1 | tail -6 | tee -a "$log" || rc=1
	timeout 90 "$tb" bench --model "$mdir" --backend gpu --n-cpu-moe 99 --prompt-len 64 --gen 64 --repeats 2 \
		--json "$res/bench-experts-cpu.json" 2>&1 | grep -E '^(prefill|decode|experts on CPU|GPU memory)' | tee -a "$log" || rc=1
	echo "== prefill benchmark ($preset BF16, 64 tokens; experts grouped vs per slot)" | tee -a "$log"
	TESSERA_BENCH_PRESET=$preset TESSERA_BENCH_DTYPE=BF16 timeout 240 "$t" -test.run NONE \
		-test.bench 'RunnerPrefill' -test.benchtime 20x 2>&1 | grep -E '^Benchmark|ok|FAIL' | tee -a "$log" || rc=1
	echo "== llama.cpp Vulkan vs tessera WebGPU ($preset F16 GGUF, same adapter)" | tee -a "$log"
	tp="$(dirname "$t")/tessera-peer"
	lib=$(mktemp -d)
	if tar -C "$lib" -xJf "$(dirname "$t")/llama-vulkan.tar.xz" &&
		timeout 120 "$tb" export --model "$mdir" --type f16 --out "$mdir.f16.gguf" >/dev/null 2>&1; then
		timeout 300 "$tp" bench --gpu --gguf "$mdir.f16.gguf" --llamacpp-dir "$lib" --threads 4 --rounds 3 \
			--prompt-lens 64,512 --gen 64 --run-timeout 90s --json "$res/bench-vulkan.json" 2>&1 | tee -a "$log" || rc=1
	else
		echo "gpu-check: could not unpack the llama.cpp Vulkan build or export the GGUF" | tee -a "$log"
		rc=1
	fi
	exit $rc
	;;
*)
	sed -n '2,32p' "$0"
	exit 2
	;;
esac
