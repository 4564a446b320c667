#!/bin/sh
# Runs every fuzz target for a fixed time and prints a Markdown table of
# what ran (target, package, time, executions, new corpus entries) — the
# numbers RELIABILITY.md records. A crash stops the campaign with the
# failing input saved under the package's testdata/fuzz/ by go test.
#   scripts/fuzz/campaign.sh [TIME] [PARALLEL]     (defaults 10m, all cores)
set -eu
cd "$(dirname "$0")/../.."
t=${1:-10m}
par=${2:-$(nproc)}
go=${GO:-go}
echo "| Target | Package | Time run | Executions | New corpus entries |"
echo "|---|---|---|---|---|"
for tp in FuzzParse:./core/config FuzzParse:./core/safetensors FuzzIndex:./core/safetensors \
	FuzzRoundTrip:./core/tokenizer FuzzScannersMatchRegexp2:./core/tokenizer FuzzLoaders:./core/tokenizer \
	FuzzTiktoken:./core/tokenizer FuzzRenderKimi:./core/tokenizer FuzzDecode:./core/imageio \
	FuzzParseConfig:./core/vision FuzzWriteNPY:./cmd/tessera FuzzServeHTTP:./cmd/tessera FuzzParse:./core/gguf \
	FuzzSchemaOutput:./core/grammar FuzzAPIRequest:./cmd/tessera/internal/api; do
	target=${tp%%:*}
	pkg=${tp#*:}
	out=$("$go" test -run=NONE -fuzz="^$target\$" -fuzztime="$t" -parallel="$par" "$pkg" 2>&1) || {
		echo "$out" | tail -30 >&2
		echo "fuzz campaign: $target in $pkg failed" >&2
		exit 1
	}
	last=$(echo "$out" | grep -E 'execs: [0-9]+' | tail -1)
	execs=$(echo "$last" | sed -E 's/.*execs: ([0-9]+).*/\1/')
	newi=$(echo "$last" | sed -nE 's/.*new interesting: ([0-9]+).*/\1/p')
	echo "| \`$target\` | ${pkg#./} | $t | $execs | ${newi:-0} |"
done
