# pipe — build, test and data targets.
#
#   make deps    install missing system packages (apt-get; no network when all present)
#   make data    fetch the real data sets into data/ (skips what is already there)
#   make build   build bin/pipe
#   make test    go vet + go test (TESTFLAGS='-run Foo -v' to narrow) with test-dist beside it; installs onnxruntime-node for the ONNX checks; then test-cpus-fast
#   make test-cpus  the numerics and memory-plan tests under emulated CPUs (OpenBLAS cores, oneDNN ISAs, Go without AVX-512)
#   make test-dist  a real single-machine SLURM (slurm-wlm, munge) runs pipe launch --slurm's job, signalled and requeued
#   make run     build, fetch data, check the examples, train the Fashion-MNIST CNN on the CPU
#   make fmt     gofmt -w the Go files, pipe fmt -w the examples
#   make lint    gofmt -l must be empty, go vet
#   make bench   go test -bench over ./bench/..., then pipe's step time against PyTorch's
#   make gpu-check  on a GPU machine (not CI): each example 50 steps on cuda:0, torch engine
#   make gpu-bundle static bin/pipe-static and bin/gpucheck for a GPU machine without Go
#   make gpu-smoke  on one GPU (not CI): ResNet-50 rows, 4 examples, run/resume, ...; bench/gpu/<gpu>.json, one packed file
#   make gpu-smoke-dry  the smoke's steps on the CPU with tiny sizes, to check the script (not in make test)
#   make editor  package the VS Code extension (editor/vscode/pipe.vsix)
#   make clean   remove build outputs (distclean also removes data/)

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build
.DELETE_ON_ERROR:
MAKEFLAGS += --no-builtin-rules

# gonum.org/v1/netlib (the BLAS behind gorgonia/tensor) links against OpenBLAS.
CGO_LDFLAGS ?= -lopenblas
export CGO_LDFLAGS

GO         ?= go
TESTFLAGS  ?=
BENCHFLAGS ?=
BIN        := bin/pipe
EXAMPLES    = $(wildcard examples/*.pipe)
# Go files that git knows of (tracked, or new and not ignored) and that exist.
GO_FILES    = $(wildcard $(shell git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null))

# System packages: BLAS for netlib, GDAL for godal, the Fashion-MNIST data set.
# python3-torch (PyTorch 1.13, CPU) runs the torch engine's tests; libtcmalloc-minimal4 is the
# malloc the torch engine preloads into its CPU workers (docs/design/torch-cpu-allocator.md).
# protobuf-compiler's protoc decodes the TensorBoard event files in the tests (and regenerates
# run/tensorboard/tbpb with go generate).
APT_PACKAGES := libopenblas-dev libgdal-dev gdal-bin libdeflate-dev libzstd-dev dataset-fashion-mnist pkg-config g++ python3-torch python3-torchvision libtcmalloc-minimal4 protobuf-compiler
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

FMNIST_SRC   := /usr/share/datasets/fashion-mnist
FMNIST_FILES := train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz \
                t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz
FMNIST       := $(addprefix data/fashion-mnist/,$(FMNIST_FILES))
# Landsat 7 ETM+ scene (6 bands, Byte) and a DEM of the same area (Float32),
# both shipped as test data inside Debian's r-cran-stars package.
LANDSAT      := data/L7_ETMs.tif data/olinda_dem_utm25s.tif
# The Landsat scene's 6 bands as the depth of a volume, clean and noisy, as
# Zarr v2 arrays (examples/volume_unet.pipe; internal/mkvolume says how).
VOLUME       := data/landsat_volume.zarr/.zgroup
# onnxruntime-node for the ONNX export's tests (bench/onnx).
ONNX_RT      := bench/onnx/node_modules/.package-lock.json
# @roboflow/tfrecords, a TFRecord CRC apart from pipe's, for the TensorBoard tests (bench/tfrecords).
TFRECORDS    := bench/tfrecords/node_modules/.package-lock.json

.PHONY: all deps deps-dist test-dist test-cpus test-cpus-fast data build test run fmt lint bench clean distclean editor editor-test gpu-check gpu-bundle gpu-smoke gpu-smoke-dry gpu-bins

all: build test

## deps: apt-get only what `dpkg -s` says is missing; `apt-get update` only then.
deps:
	@missing=(); \
	for p in $(APT_PACKAGES); do \
	  [[ "$$(dpkg -s "$$p" 2>/dev/null)" == *"Status: install ok installed"* ]] || missing+=("$$p"); \
	done; \
	if (( $${#missing[@]} )); then \
	  echo "deps: installing $${missing[*]}"; \
	  $(SUDO) apt-get update -qq; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$${missing[@]}"; \
	else \
	  echo "deps: all system packages present"; \
	fi
	@# node and npm run the ONNX export's checks (onnxruntime-node); an npm
	@# that came with another nodejs package counts.
	@if ! command -v node >/dev/null || ! command -v npm >/dev/null; then \
	  echo "deps: installing nodejs npm"; \
	  $(SUDO) apt-get update -qq; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; \
	fi

## data: real data into data/ (git-ignored); targets are files, so present ones are skipped.
data: $(FMNIST) $(LANDSAT) $(VOLUME)

$(FMNIST): data/fashion-mnist/%: | deps
	@mkdir -p $(@D)
	cp $(FMNIST_SRC)/$* $@.tmp && mv $@.tmp $@

# One download produces both files (grouped target). R itself is never installed:
# the .deb is only unpacked into a temporary folder.
$(LANDSAT) &: | deps
	@mkdir -p data
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; chown _apt "$$tmp" 2>/dev/null || true; \
	cd "$$tmp"; \
	if ! apt-get download -qq r-cran-stars 2>/dev/null; then \
	  echo "data: refreshing package lists for r-cran-stars"; \
	  $(SUDO) apt-get update -qq; \
	  apt-get download -qq r-cran-stars; \
	fi; \
	dpkg-deb -x r-cran-stars_*.deb x; \
	cd - >/dev/null; \
	for f in $(notdir $(LANDSAT)); do \
	  src=$$(find "$$tmp/x" -path "*/stars/tif/$$f" -print -quit); \
	  [ -n "$$src" ] || { echo "data: $$f not found in r-cran-stars" >&2; exit 1; }; \
	  cp "$$src" data/$$f.tmp && mv data/$$f.tmp data/$$f; \
	  echo "data: data/$$f"; \
	done

$(VOLUME): data/L7_ETMs.tif internal/mkvolume/main.go
	$(GO) run ./internal/mkvolume data/L7_ETMs.tif data/landsat_volume.zarr

# The version pipe version prints: git describe needs no network, and
# gives the commit alone when there is no tag; empty outside a checkout,
# where pipe falls back on what Go stamped.
VERSION    := $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT     := $(shell git rev-parse HEAD 2>/dev/null)
LDVERSION   = -X main.version=$(VERSION) -X main.commit=$(COMMIT)

## build: bin/pipe (go's own cache makes a no-change rebuild cheap).
build:
	$(GO) build -ldflags '$(LDVERSION)' -o $(BIN) ./cmd/pipe

# The editor's grammar tests run first, so go test's own summary closes the output.
# The torch engine's tests drive Debian's python3-torch, and fail rather than skip
# when it cannot be imported.
TORCH_PYTHON ?= /usr/bin/python3
# The ONNX export's tests run onnxruntime-node (bench/onnx), and fail rather than skip
# when it is missing; the TensorBoard tests likewise fail without protoc or bench/tfrecords.
# test-dist runs beside go test (its jobs mostly wait on SLURM's daemons and on each other; its
# log is printed after go test's); a failure of either fails make test.
test: deps data $(ONNX_RT) $(TFRECORDS) deps-dist build
	@$(MAKE) --no-print-directory editor-test
	$(GO) vet ./...
	@log=$$(mktemp); \
	( rc=0; $(MAKE) --no-print-directory test-dist >$$log 2>&1 || rc=$$?; echo $$rc >$$log.rc ) & \
	rc=0; set -x; PIPE_PYTHON=$(TORCH_PYTHON) PIPE_REQUIRE_TORCH=1 PIPE_REQUIRE_ONNX=1 PIPE_REQUIRE_K8S_SCHEMA=1 PIPE_REQUIRE_PROTOC=1 PIPE_REQUIRE_TFRECORDS=1 $(GO) test -timeout 30m $(TESTFLAGS) ./... || rc=$$?; set +x; \
	wait; cat $$log; drc=$$(cat $$log.rc); rm -f $$log $$log.rc; \
	[ "$$drc" = 0 ] || echo "make test: test-dist failed (exit $$drc)"; \
	[ "$$rc" = 0 ] || echo "make test: go test failed (exit $$rc)"; \
	[ "$$rc" = 0 ] && [ "$$drc" = 0 ]
	@$(MAKE) --no-print-directory test-cpus-fast

# test-cpus runs the numerics and memory-plan tests under the CPU personalities this machine
# can emulate, one variable at a time: OPENBLAS_CORETYPE Haswell, SkylakeX and Prescott (the
# native engine's BLAS), ONEDNN_MAX_CPU_ISA AVX2, AVX512_CORE and AVX512_CORE_BF16 (the torch
# worker's convs), GODEBUG=cpu.avx512f=off (the native engine's Go assembly), and nothing set
# (test/cpus/cpus.sh lists the tests). About 15 minutes on 2 cores, 10 of them the memory tests.
# test-cpus-fast, part of make test, is two of its runs: the DeepLab example twin on OpenBLAS's
# Prescott kernels and the native numerics without AVX-512 in Go (about 45 s on 2 cores).
test-cpus: deps data
	PIPE_PYTHON=$(TORCH_PYTHON) GO=$(GO) bash test/cpus/cpus.sh all

test-cpus-fast: deps data
	PIPE_PYTHON=$(TORCH_PYTHON) GO=$(GO) bash test/cpus/cpus.sh fast

# test-dist starts munged, slurmctld and slurmd on this machine (as root, config and state in a
# temporary folder, all stopped on exit), and has them run the sbatch script pipe launch --slurm
# writes: two jobs side by side in the default run folder, one signalled with USR1 mid-run that
# requeues itself and must resume its own run with the other's losses, and a one-task job that
# starts its own two workers (test/dist/slurm.sh). About 30 s on 2 cores.
DIST_PACKAGES := slurm-wlm munge
deps-dist:
	@missing=(); \
	for p in $(DIST_PACKAGES); do \
	  [[ "$$(dpkg -s "$$p" 2>/dev/null)" == *"Status: install ok installed"* ]] || missing+=("$$p"); \
	done; \
	if (( $${#missing[@]} )); then \
	  echo "deps-dist: installing $${missing[*]}"; \
	  $(SUDO) apt-get update -qq; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$${missing[@]}"; \
	fi

test-dist: deps-dist build
	$(SUDO) env PIPE=$(BIN) PY=$(TORCH_PYTHON) bash test/dist/slurm.sh

# onnxruntime-node, pinned in bench/onnx/package-lock.json, with its CPU binaries only
# (the package's GPU download is skipped).
$(ONNX_RT): bench/onnx/package-lock.json bench/onnx/package.json | deps
	cd bench/onnx && ONNXRUNTIME_NODE_INSTALL_CUDA=skip $(NPM) ci --no-audit --no-fund

# @roboflow/tfrecords and its 6 small dependencies, pinned in bench/tfrecords/package-lock.json.
$(TFRECORDS): bench/tfrecords/package-lock.json bench/tfrecords/package.json | deps
	cd bench/tfrecords && $(NPM) ci --no-audit --no-fund

run: build data
	@if [ -z "$(EXAMPLES)" ]; then echo "run: no examples/*.pipe yet"; exit 0; fi; \
	set -x; \
	$(BIN) check $(EXAMPLES); \
	$(BIN) fmt --check $(EXAMPLES)
	@# Train the Fashion-MNIST CNN on the CPU (5 epochs, about a minute
	@# on a quiet 2-core machine); the summary ends with the test accuracy, and
	@# out/fashion/latest/ holds the run's report, loss curve and checkpoints.
	$(BIN) run --device cpu examples/fashion.pipe

# gofmt first, so Go sources get formatted even when bin/pipe does not build.
fmt:
	@files="$(GO_FILES)"; [ -z "$$files" ] || gofmt -w $$files
	$(GO) build -o $(BIN) ./cmd/pipe
	@if [ -n "$(EXAMPLES)" ]; then set -x; $(BIN) fmt -w $(EXAMPLES); fi

lint: deps
	@files="$(GO_FILES)"; bad=$$([ -z "$$files" ] || gofmt -l $$files); \
	if [ -n "$$bad" ]; then echo "lint: not gofmt-ed (run make fmt):"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...

# bench: the Go benchmarks of bench/, each example's planned memory against the peak resident
# memory the OS measured for its run (go run ./bench/cmd/memory: bench/memory.json), each
# example's forecast step time against its run's on both engines (go run ./bench/cmd/steptime:
# bench/steptime.json), pipe serve
# under 1 to 256 concurrent clients with batching on and off (go run ./bench/cmd/load:
# bench/serve.json), then
# pipe's training step against PyTorch's on this machine (go run ./bench/cmd/ratios: ratio
# pipe/PyTorch per model and GFLOP/s as a share of an SGEMM's, targets beside them,
# bench/results.json); int8 inference against fp32 (go run
# ./bench/cmd/int8: accuracy and forward speed, bench/int8.json); pipe's CPU inference (fp32,
# int8) beside onnxruntime-node's on the same exported fashion model, batch 1 and 64, same threads
# (go run ./bench/cmd/infer: bench/infer.json); GeoTIFF tiles/s of the geotiff
# source against raw GDAL reads (go run ./bench/cmd/tiles: bench/tiles.json); the same source
# from s3:// on a local S3 server at 0, 20 and 50 ms of added latency against the local file and
# raw GDAL /vsis3/ reads (go run ./bench/cmd/s3tiles: bench/s3tiles.json); and the torch engine's
# overhead per step over a plain PyTorch loop in its worker, queued ahead as pipe run drives it
# (go run ./bench/cmd/protocol: bench/protocol.json).
# Debian's python3-torch is installed when $(TORCH_PYTHON) cannot import torch; when that
# fails the comparison is skipped with a message. RATIOSFLAGS='-rounds 3' passes flags.
RATIOSFLAGS  ?=
TILESFLAGS   ?=
bench: deps data build $(ONNX_RT)
	$(GO) test -run=NONE -bench=. $(BENCHFLAGS) ./bench/...
	$(GO) run ./bench/cmd/memory -pipe $(BIN)
	$(GO) run ./bench/cmd/steptime -pipe $(BIN)
	$(GO) run ./bench/cmd/int8
	$(GO) run ./bench/cmd/infer
	$(GO) run ./bench/cmd/load -pipe $(BIN)
	$(GO) run ./bench/cmd/tiles $(TILESFLAGS)
	$(GO) run ./bench/cmd/s3tiles
	@if ! $(TORCH_PYTHON) -c 'import torch' 2>/dev/null; then \
	  echo "bench: installing python3-torch for the PyTorch comparison"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch || \
	  { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-torch; } || true; \
	fi; \
	if ! $(TORCH_PYTHON) -c 'import torch' 2>/dev/null; then \
	  echo "bench: skipping the PyTorch comparison: $(TORCH_PYTHON) cannot import torch, and installing python3-torch did not help (set TORCH_PYTHON to a Python that can)"; \
	  exit 0; \
	fi; \
	set -x; $(GO) run ./bench/cmd/ratios -python $(TORCH_PYTHON) $(RATIOSFLAGS) && \
	$(GO) run ./bench/cmd/protocol -python $(TORCH_PYTHON)

# ---- GPU machines --------------------------------------------------------------
# gpu-check trains every example for 50 steps on cuda:0 with the torch engine and prints
# the planned memory beside what the device measured and pipe's samples/s beside a plain
# PyTorch loop's (bench/cmd/gpucheck); it exits non-zero when a run fails. Not in CI.
# A GPU machine without Go, OpenBLAS or GDAL runs the static binaries that gpu-bundle
# builds here (CGO_ENABLED=0: no GeoTIFF, pure-Go BLAS); bring bin/ along.
GPU_PYTHON     ?= python3
GPUCHECKFLAGS  ?= -steps 50
# Stripped (-s -w), so that both travel to a GPU machine in under 64 MiB.
gpu-bundle:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w $(LDVERSION)' -o bin/pipe-static ./cmd/pipe
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/gpucheck ./bench/cmd/gpucheck

# gpu-smoke is the torch engine's end-to-end check on one GPU, at most 7 minutes
# (bench/gpu/smoke.sh says what it runs): it writes bench/gpu/<gpu>.json, and packs its
# work folder (out/gpu-smoke) into one file, $(GPU_SMOKE_PACK)/gpu-smoke.tar.gz, after
# every step and on any exit. It needs bin/ from gpu-bundle and no Go; with no GPU it
# exits 2. gpu-smoke-dry runs the same steps on the CPU at tiny sizes (SMOKE_DEVICE=cpu).
GPU_SMOKE_PACK ?= out/gpu-smoke-pack
gpu-smoke: gpu-bins
	PY=$(GPU_PYTHON) SMOKE_PACK_DIR=$(GPU_SMOKE_PACK) bash bench/gpu/smoke.sh out/gpu-smoke

# The dry run's sizes: two steps of each (one of them warm-up), ResNet-50 at batch 2;
# its pack is out/gpu-smoke-dry-pack/gpu-smoke.tar.gz, its report stays in out/gpu-smoke-dry.
gpu-smoke-dry: gpu-bins
	SMOKE_DEVICE=cpu SMOKE_RESNET_BATCH=2 SMOKE_RESNET_STEPS=2 SMOKE_PLAIN_STEPS=1 SMOKE_PLAIN_WARMUP=1 \
	  SMOKE_CHECK_STEPS=2 SMOKE_WARMUP=1 SMOKE_MLP_STEPS=2 SMOKE_STEPS=2 PY=$${PIPE_PYTHON:-$(GPU_PYTHON)} \
	  SMOKE_PACK_DIR=out/gpu-smoke-dry-pack bash bench/gpu/smoke.sh out/gpu-smoke-dry

# gpu-bins: bin/ from gpu-bundle where Go is (rebuilt, so never stale), else bin/ as brought.
gpu-bins:
	@if command -v $(GO) >/dev/null 2>&1; then $(MAKE) --no-print-directory gpu-bundle; \
	elif [ ! -x bin/pipe-static ] || [ ! -x bin/gpucheck ]; then \
	  echo "gpu-smoke: no Go here and no bin/; run make gpu-bundle on a machine with Go and bring bin/" >&2; exit 1; \
	fi

gpu-check:
	@if command -v $(GO) >/dev/null 2>&1; then \
	  mkdir -p bin; CGO_ENABLED=0 $(GO) build -o bin/gpucheck ./bench/cmd/gpucheck; \
	elif [ ! -x bin/gpucheck ]; then \
	  echo "gpu-check: no Go here and no bin/gpucheck; run make gpu-bundle on a machine with Go and bring bin/" >&2; exit 1; \
	fi
	bin/gpucheck -python $(GPU_PYTHON) $(GPUCHECKFLAGS) $(EXAMPLES)

clean:
	rm -rf bin out

distclean: clean
	rm -rf data

# ---- editor support (editor/) ------------------------------------------------
# The VS Code extension's npm packages are pinned in editor/vscode/package-lock.json;
# npm ci runs only when node_modules is missing or older than the lock file.
# Without npm the grammar tests are skipped (with a message) and `make editor` fails.
NPM      ?= npm
VSCODE   := editor/vscode
HAVE_NPM := $(shell command -v $(NPM) 2>/dev/null)

$(VSCODE)/node_modules/.package-lock.json: $(VSCODE)/package-lock.json $(VSCODE)/package.json
	cd $(VSCODE) && $(NPM) ci --no-audit --no-fund

## editor-test: TextMate grammar tests, every example tokenised with the grammar, its colours in the stock themes, and the extension's restart on a settings change.
ifeq ($(HAVE_NPM),)
editor-test:
	@echo "editor-test: npm not found; skipping the editor grammar tests (install node and npm to run them)"
else
editor-test: $(VSCODE)/node_modules/.package-lock.json
	cd $(VSCODE) && $(NPM) test
endif

## editor: package the VS Code extension as editor/vscode/pipe.vsix.
editor: $(VSCODE)/node_modules/.package-lock.json
	cd $(VSCODE) && npx --no -- vsce package --skip-license --allow-missing-repository -o pipe.vsix
