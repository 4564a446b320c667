# tessera — see README.md. `make run` and `make test` install what they need
# (Debian packages through scripts/setup.sh, as root) when it is missing.

GO      ?= go
BIN     := bin/tessera
OUT     := out
PRESET  ?= k3-nano
PROMPT  ?= The quick brown fox
export GOFLAGS ?= -buildvcs=false

.PHONY: all build setup run test test-unit test-fuzz test-builds test-gpu test-browser test-desktop bench lint wasm goldens clean

all: build

setup:
	@scripts/setup.sh base

build: setup
	$(GO) build -o $(BIN) ./cmd/tessera

# The main job: native inference. Until the trained demo model lands this
# writes a random k3-nano checkpoint, summarises it and generates from it.
run: build
	@test -f $(OUT)/$(PRESET)/config.json || $(BIN) init-random --config $(PRESET) --seed 1 --layout kimi_k3 --out $(OUT)/$(PRESET)
	$(BIN) inspect $(OUT)/$(PRESET)
	$(BIN) run --model $(OUT)/$(PRESET) --prompt "$(PROMPT)" --max-tokens 32 --ids

test: setup lint test-unit test-fuzz test-builds
	@echo "make test: all passed"

test-unit:
	$(GO) test -count=1 ./...

# Each fuzz target runs briefly on top of its committed seed corpus.
FUZZ_TIME ?= 10s
test-fuzz:
	$(GO) test -run=NONE -fuzz='^FuzzParse$$' -fuzztime=$(FUZZ_TIME) ./core/config/
	$(GO) test -run=NONE -fuzz='^FuzzParse$$' -fuzztime=$(FUZZ_TIME) ./core/safetensors/
	$(GO) test -run=NONE -fuzz='^FuzzIndex$$' -fuzztime=$(FUZZ_TIME) ./core/safetensors/

# The core builds for the browser (GOOS=js) and without cgo.
test-builds:
	GOOS=js GOARCH=wasm $(GO) build ./core/...
	CGO_ENABLED=0 $(GO) build ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench:
	$(GO) test -run=NONE -bench=. -benchmem -benchtime=2s ./core/...

# Regenerate testdata/golden from the PyTorch reference (needs python3-torch).
goldens:
	@scripts/setup.sh torch
	/usr/bin/python3 models/reference/make_goldens.py
	/usr/bin/python3 -m unittest models/reference/test_k3ref.py

clean:
	rm -rf bin $(OUT)
