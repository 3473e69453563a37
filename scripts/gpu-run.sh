#!/usr/bin/env bash
# The GPU run, as one command on a machine with an NVIDIA GPU and no network:
# build the whisper.cpp engine with CUDA from the carried source distribution
# (scripts/build-cuda.sh), then run benchmarks/bench_gpu.py on the carried
# models, on the card and on this machine's CPU. Everything lands in $OUT
# (default bench-results/): gpu-run.log, nvidia-smi.txt, build-cuda.log,
# bench_gpu.json, bench_gpu.txt.
#
# Before, where there is network: scripts/gpu-prepare.sh [model ...] fills .gpu/
# (ignored by git). Then carry .gpu with the working tree and run, from the
# repository root:
#   scripts/gpu-run.sh [--budget-s SECONDS]
# The whole run keeps to RUN_LIMIT_S (default 570 s): the benchmark gets what
# the build left. A second run on the same machine reuses the build.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-results}
LIMIT=${RUN_LIMIT_S:-570}
CACHE=${GPU_CACHE:-.gpu}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/gpu-run.log") 2>&1
start=$(date +%s)
echo "gpu-run: $(date -u +%FT%TZ) on $(hostname), $(nproc) cores, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 || echo "gpu-run: nvidia-smi failed (no GPU?)"
head -12 "$OUT/nvidia-smi.txt"

VENV=${GPU_VENV:-.gpu-venv}  # not inside .gpu: carrying .gpu again would replace it
PYTHON=${PYTHON:-python3} timeout $(( LIMIT - 120 )) scripts/build-cuda.sh --venv "$VENV" --cache "$CACHE"
built=$?
cp "$VENV/build-cuda.log" "$OUT/" 2>/dev/null || true
PY="$VENV/bin/python"
if [ $built -ne 0 ]; then
    echo "gpu-run: the CUDA build failed or ran out of time (exit $built); the benchmark runs on what imports"
    [ -x "$PY" ] || PY=${PYTHON:-python3}
fi

left=$(( LIMIT - ($(date +%s) - start) - 30 ))
budget=${1:-}
[ "$budget" = "--budget-s" ] && left=$2
[ "$left" -gt 60 ] || { echo "gpu-run: no time left for the benchmark"; exit 1; }
models=$(ls -d "$CACHE"/models/* 2>/dev/null | paste -sd, -)
echo "gpu-run: bench_gpu.py on ${models:-tiny.en-q5_0}, budget ${left} s"
PYTHONPATH=src:workers PYTHONUNBUFFERED=1 GGML_NO_BACKTRACE=1 timeout $(( left + 25 )) \
    "$PY" benchmarks/bench_gpu.py ${models:+--models "$models"} --clips "$CACHE/clips.npz" \
    --budget-s "$left" --json "$OUT/bench_gpu.json" | tee "$OUT/bench_gpu.txt"
status=${PIPESTATUS[0]}
echo "gpu-run: done in $(( $(date +%s) - start )) s (benchmark exit $status)"
exit "$status"
