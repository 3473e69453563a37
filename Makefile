# voxwire: `make run` starts the platform, `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JS := client-sdk/js
JS_STAMP := $(JS)/node_modules/.installed
# pytest processes: most tests wait on servers, streams and subprocesses (the CPU is
# idle about half the time with one), so two share the cores; the tests marked
# `serial` (they stop or freeze a shared server) run alone afterwards
TEST_WORKERS ?= 2

.PHONY: run test test-js web lint typecheck layers pytest bench chaos contract models clean help services services-stop run-distributed helm image image-gpu image-check

help:
	@echo "make run     start voxwire (embedded: broker, workers, gateway, web app) in the foreground"
	@echo "make test    lint, type-check and run the whole test suite"
	@echo "make bench   print figures: raw engine vs pipeline, bridge vs MQTT ceiling, streams, VAD"
	@echo "make chaos   chaos soak (not in make test): faults injected into the distributed platform"
	@echo "             under load, then an audit; it RESTARTS the servers of scripts/services.sh env"
	@echo "make contract  regenerate the AsyncAPI document and JSON Schemas"
	@echo "make services  start Mosquitto, Kafka, PostgreSQL, Redis, OpenSearch (loopback)"
	@echo "make services-stop  stop them"
	@echo "make run-distributed  gateway, worker and bridge on those services"
	@echo "make image   build the OCI image (all roles) into .cache/image"
	@echo "make image-gpu  the same with CUDA 12's cuBLAS, for GPU worker pools"
	@echo "make image-check  build the image and transcribe a clip through it (podman)"
	@echo "make helm    lint and render the Helm chart, every object checked against the Kubernetes API types"

$(STAMP): pyproject.toml client-sdk/python/pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e client-sdk/python -e '.[dev]'
	@touch $@

# the browser SDK's one dependency (mqtt.js), also served to the web app
$(JS_STAMP): $(JS)/package.json $(JS)/package-lock.json
	cd $(JS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

web: $(JS_STAMP)

# libopus with LACE for Opus streams (needs a C compiler; without it, FFmpeg's decoder)
run: $(STAMP) $(JS_STAMP)
	-$(BIN)/voxwire models install opus-lace
	$(BIN)/voxwire up

services:
	scripts/services.sh start

services-stop:
	scripts/services.sh stop

run-distributed: $(STAMP) $(JS_STAMP) services
	set -a && eval "$$(scripts/services.sh env)" && set +a && $(BIN)/voxwire up --distributed

models: $(STAMP)
	$(BIN)/voxwire models install

test: lint typecheck layers test-js pytest

# the browser SDK: its JSDoc types checked by tsc, its unit tests with Node's own runner
test-js: $(JS_STAMP)
	cd $(JS) && node_modules/.bin/tsc -p . && node --test test/*.test.js

lint: $(STAMP)
	$(BIN)/ruff check .

# strict, over every portion of the voxwire namespace and the SDK (pyproject.toml: [tool.mypy])
typecheck: $(STAMP)
	$(BIN)/mypy

# the layer order and the independence of the services (pyproject.toml: [tool.importlinter])
layers: $(STAMP)
	$(BIN)/lint-imports

pytest: $(STAMP) $(JS_STAMP) services
	scripts/services.sh browser
	scripts/services.sh speech
	scripts/helm.sh tools
	$(BIN)/voxwire models install
	$(BIN)/voxwire models install speaker-segmentation speaker-campplus opus-lace
	$(BIN)/pytest -q -n $(TEST_WORKERS) -m "not serial" --durations=25
	$(BIN)/pytest -q -m serial --durations=5

bench: $(STAMP) services
	$(BIN)/voxwire models install
	$(BIN)/python benchmarks/bench_engines.py
	$(BIN)/python benchmarks/bench_files.py
	set -a && eval "$$(scripts/services.sh env)" && set +a && $(BIN)/python benchmarks/bench_bridge.py
	set -a && eval "$$(scripts/services.sh env)" && set +a && $(BIN)/python benchmarks/bench_ingest_gate.py
	$(BIN)/python benchmarks/bench_distributed_files.py
	$(BIN)/python benchmarks/bench_streams.py
	$(BIN)/python benchmarks/bench_retranscribe.py
	$(BIN)/python benchmarks/bench_live_accuracy.py
	$(BIN)/python benchmarks/bench_vad.py
	$(BIN)/python benchmarks/bench_opus.py
	set -a && eval "$$(scripts/services.sh env)" && set +a && $(BIN)/python benchmarks/bench_search.py
	$(BIN)/python benchmarks/bench_redaction.py
	$(BIN)/python benchmarks/bench_load.py
	$(BIN)/python benchmarks/bench_load.py --mode distributed
	$(BIN)/python benchmarks/bench_tenants.py
	$(BIN)/python benchmarks/bench_telephone.py
	$(BIN)/python benchmarks/bench_channels.py
	$(BIN)/python benchmarks/bench_loops.py
	$(BIN)/python benchmarks/bench_two_party.py

# the chaos soak: two of each role under streams, uploads and searches while kill -9, SIGTERM,
# server restarts and a frozen worker are injected (docs/benchmarks.md); not part of `make test`
# or `make bench`: it restarts the servers that `scripts/services.sh env` names, so point
# VOXWIRE_SERVICES_DIR and the ports at a set nobody else uses. CHAOS_ARGS: e.g. --duration-s 120
CHAOS_ARGS ?=
chaos: $(STAMP) services
	$(BIN)/voxwire models install
	set -a && eval "$$(scripts/services.sh env)" && set +a && $(BIN)/python benchmarks/bench_chaos.py $(CHAOS_ARGS)

# the OCI image, from Debian packages (mmdebstrap) and the pinned wheels, packed by umoci
image: $(STAMP)
	scripts/image.sh build

# the GPU variant (tag <version>-gpu): the same tree and CUDA 12's cuBLAS (the gpu extra)
image-gpu: $(STAMP)
	scripts/image.sh build --gpu

# what .ci/run does after the tests: build the image, run it read-only and transcribe through it
image-check: $(STAMP)
	scripts/image.sh build
	scripts/image.sh smoke

# helm and the manifest validator are built from the Go module proxy into .cache/tools
helm:
	scripts/helm.sh check

contract: $(STAMP)
	$(BIN)/voxwire contract --out client-sdk/contract

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache
