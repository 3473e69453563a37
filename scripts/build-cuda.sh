#!/usr/bin/env bash
# Build the whisper.cpp engine (pywhispercpp from its source distribution) with
# CUDA into a virtual environment, offline, for the card of this machine only.
#
#   scripts/build-cuda.sh [--venv DIR] [--cache DIR] [--arch 90] [--force]
#
#   --venv   where to build (default .gpu-venv, beside the carried .gpu so that a
#            later run that carries .gpu again keeps it); made with $PYTHON (default
#            python3) and, when that Python is itself a virtual environment (a
#            CUDA image's), seeing its packages (numpy, cmake, ninja) through a .pth
#   --cache  what scripts/gpu-prepare.sh fetched (default .gpu): dist/ and wheels/
#   --arch   CUDA compute capability without the dot (default: the first card's,
#            from nvidia-smi: 90 on an H100/H200); one architecture builds in minutes
#   --force  rebuild even if the venv already holds a CUDA build
#
# Needs nvcc (CUDA 12 or 13), cmake and a C++ compiler; no network. Every
# environment variable reaches whisper.cpp's CMake as -D<NAME>=<value>
# (pywhispercpp's setup.py passes them all), so GGML_* options can be set here.
# At the end it prints whisper.cpp's system info, which names CUDA in a CUDA build.
# An existing voxwire checkout uses the result with
#   VOXWIRE_DEVICE=cuda .gpu-venv/bin/python ...   (PYTHONPATH: src and workers)
# or, installed into the project's own venv instead: --venv .venv.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.gpu-venv
CACHE=.gpu
ARCH=""
FORCE=0
while [ $# -gt 0 ]; do
    case "$1" in
        --venv) VENV=$2; shift 2 ;;
        --cache) CACHE=$2; shift 2 ;;
        --arch) ARCH=$2; shift 2 ;;
        --force) FORCE=1; shift ;;
        *) echo "unknown option $1 (see the top of $0)" >&2; exit 2 ;;
    esac
done
PYTHON=${PYTHON:-python3}

fail() { echo "build-cuda: $*" >&2; exit 1; }

sdist=$(ls "$CACHE"/dist/pywhispercpp-*.tar.gz 2>/dev/null | head -1 || true)
[ -n "$sdist" ] || fail "no pywhispercpp source distribution in $CACHE/dist: run scripts/gpu-prepare.sh where there is network, and carry $CACHE"

if [ -x "$VENV/bin/python" ] && [ "$FORCE" = 0 ] && "$VENV/bin/python" -c '
import _pywhispercpp as pw, re, sys
sys.exit(0 if re.search(r"(^|\|)\s*CUDA\s*:", pw.whisper_print_system_info()) else 1)' 2>/dev/null; then
    echo "build-cuda: $VENV already holds a CUDA build of whisper.cpp (--force to rebuild)"
    exit 0
fi

NVCC=${CUDACXX:-$(command -v nvcc || true)}
[ -n "$NVCC" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || NVCC=/usr/local/cuda/bin/nvcc
[ -n "$NVCC" ] || fail "nvcc not found: install the CUDA toolkit, or set CUDACXX to its nvcc"
export CUDACXX=$NVCC
export PATH="$(dirname "$NVCC"):$PATH"

if [ -z "$ARCH" ]; then
    ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .' || true)
    [ -n "$ARCH" ] || fail "cannot read the card's compute capability from nvidia-smi: pass --arch (e.g. 90)"
fi

if [ ! -x "$VENV/bin/python" ]; then
    # without pip: an image's Python may lack ensurepip; pip comes from $PYTHON
    "$PYTHON" -m venv --without-pip "$VENV"
    # A CUDA image's python3 is often a venv itself; a venv made from it does
    # not see its packages (numpy, cmake, ninja, pip) unless told to.
    base=$("$PYTHON" -c 'import site, sys; print("\n".join(site.getsitepackages()) if sys.prefix != sys.base_prefix else "")')
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    [ -z "$base" ] || printf '%s\n' "$base" > "$site/_base_environment.pth"
fi
vpip() {
    if "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
        "$VENV/bin/python" -m pip --disable-pip-version-check "$@"
    else
        "$PYTHON" -m pip --disable-pip-version-check --python "$VENV/bin/python" "$@"
    fi
}
# the Python's own bin (cmake, ninja from pip) on PATH for setup.py
export PATH="$(dirname "$("$PYTHON" -c 'import sys; print(sys.executable)')"):$PATH"
vpip install --quiet --no-index --no-deps "$CACHE"/wheels/*.whl
command -v cmake >/dev/null || fail "cmake not found (pip install cmake, or the system's)"

echo "build-cuda: $(basename "$sdist") with CUDA for sm_$ARCH ($("$NVCC" --version | tail -1)), $(nproc) jobs"
start=$(date +%s)
log="$VENV/build-cuda.log"
if ! (
    export GGML_CUDA=1 CMAKE_CUDA_ARCHITECTURES="$ARCH" GGML_CUDA_NCCL=OFF \
        CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" CMAKE_BUILD_TYPE=Release
    # the extension finds libwhisper and libggml* beside it (setup.py sets this
    # only for editable installs; without it the import fails)
    export CMAKE_INSTALL_RPATH='$ORIGIN' CMAKE_BUILD_WITH_INSTALL_RPATH=ON
    vpip install --no-index --no-deps --no-build-isolation --force-reinstall -v "$sdist"
) >"$log" 2>&1; then
    tail -40 "$log" >&2
    fail "the build failed; the whole log is $log"
fi
echo "build-cuda: built in $(( $(date +%s) - start )) s (log: $log)"
info=$("$VENV/bin/python" -c 'import _pywhispercpp as pw; print(pw.whisper_print_system_info())')
echo "build-cuda: whisper.cpp system info: $info"
echo "$info" | grep -Eq '(^|\|) *CUDA *:' || fail "the library was built without CUDA (see $log)"
