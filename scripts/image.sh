#!/usr/bin/env bash
# The voxwire container image (OCI), built from Debian packages and the project's pinned
# Python dependencies: no base image is pulled.
#
#   scripts/image.sh build [--gpu]   .cache/image/oci (an OCI layout, tag voxwire:<version>)
#                            and .cache/image/voxwire.tar (the same as an OCI archive);
#                            --gpu: the GPU variant, oci-gpu and voxwire-gpu.tar, tag
#                            voxwire:<version>-gpu, with CUDA 12's cuBLAS (the gpu extra)
#   scripts/image.sh smoke [--gpu] [FILE]  run the image with podman (runc), read-only, no
#                            capabilities: `voxwire up` in it, FILE (default: the eval's
#                            whisper_jfk.flac) transcribed through it from here; --gpu
#                            first has `voxwire devices` report the device and cuBLAS
#
# How: mmdebstrap makes a minimal Debian root filesystem (python3, CA certificates) at the
# last commit's time (SOURCE_DATE_EPOCH); pip installs voxwire and its dependencies into
# /opt/voxwire of that tree (wheels for this machine's CPython 3.11, as Debian's); the
# tiny.en models and libopus with LACE (built here, for Opus streams) are baked into
# /opt/voxwire/cache; every file's time is set to the commit's;
# umoci packs the tree as one layer and writes the image config (user 10001, entry point
# `python3 -m voxwire.cli`). Needs root and apt (mmdebstrap, umoci; podman and runc to run).
# The GPU variant adds NVIDIA's cuBLAS wheel (what CTranslate2 opens on CUDA; the driver
# comes from the host) with its folder on LD_LIBRARY_PATH.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${VOXWIRE_IMAGE_DIR:-$ROOT/.cache/image}
SUITE=bookworm
PACKAGES=python3,ca-certificates,libgomp1
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)
GPU=
TAG=voxwire:$VERSION
NAME=voxwire
EPOCH=$(git -C "$ROOT" log -1 --format=%ct)
SITE=/opt/voxwire/lib/python3.11/site-packages
PYTHON=${VOXWIRE_IMAGE_PYTHON:-$ROOT/.venv/bin/python}

need() {
    local missing=()
    for tool in "$@"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
    if ((${#missing[@]})); then
        echo "image.sh: installing ${missing[*]} (apt)" >&2
        # a fresh machine's package lists may be missing or stale
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
    fi
}

# --gpu: the GPU variant's names
variant() {
    case ${1:-} in
        --gpu) GPU=1 TAG=voxwire:$VERSION-gpu NAME=voxwire-gpu ;;
        --*) echo "image.sh: unknown option $1 (--gpu is the one)" >&2 && exit 2 ;;
        *) return 1 ;;
    esac
}

build() {
    need mmdebstrap umoci
    mkdir -p "$WORK"
    local base=$WORK/base-$SUITE-${PACKAGES//,/-}.tar
    if [[ ! -f $base ]]; then
        # a tarball, whatever the name: mmdebstrap would take "$base.part" for a directory;
        # what a failed or older run left there (a directory once) goes first
        rm -rf "$base" "$base.part"
        SOURCE_DATE_EPOCH=$EPOCH mmdebstrap --variant=minbase --format=tar \
            --include="$PACKAGES" "$SUITE" "$base.part" >&2
        mv "$base.part" "$base"
    fi
    local oci=$WORK/oci${NAME#voxwire} bundle=$WORK/bundle${NAME#voxwire}
    rm -rf "$oci" "$bundle"
    umoci init --layout "$oci"
    umoci new --image "$oci:$TAG"
    umoci unpack --image "$oci:$TAG" "$bundle" >&2
    local tree=$bundle/rootfs
    tar -C "$tree" -xf "$base"
    # pip decides environment markers by this machine's Python; Debian's 3.11.2 also needs
    # what redis asks for below 3.11.3
    "$PYTHON" -m pip install --quiet --root "$tree" --prefix /opt/voxwire --ignore-installed \
        --no-compile --no-warn-script-location "$ROOT/client-sdk/python" "$ROOT${GPU:+[gpu]}" \
        async-timeout==5.0.1 >&2
    # the models the default engines run: faster-whisper reads tiny.en from its package,
    # whisper.cpp the ggml file converted from it; made once in $WORK/cache (libopus takes
    # minutes to compile on a busy machine), then copied in without the downloads
    PYTHONPATH=$tree$SITE VOXWIRE_CACHE_DIR=$WORK/cache \
        "$PYTHON" -m voxwire.cli models install tiny.en opus-lace >&2
    mkdir -p "$tree/opt/voxwire"
    # copied as new files, so that every file gets the commit's time below
    cp -a --no-preserve=timestamps "$WORK/cache" "$tree/opt/voxwire/cache"
    rm -rf "$tree/opt/voxwire/cache/packages"
    install -d -o 10001 -g 10001 -m 0750 "$tree/var/lib/voxwire"
    find "$tree" -newermt "@$EPOCH" -print0 | xargs -0r touch -h -d "@$EPOCH"
    local created env=()
    created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
    # the GPU variant: CTranslate2 opens cuBLAS by name, from the wheel's folder
    [[ -z $GPU ]] || env=(--config.env "LD_LIBRARY_PATH=$SITE/nvidia/cublas/lib")
    umoci repack --image "$oci:$TAG" --history.created "$created" \
        --history.created_by "scripts/image.sh build" "$bundle" >&2
    umoci config --image "$oci:$TAG" --created "$created" --history.created "$created" \
        --author voxwire --history.created_by "scripts/image.sh build" \
        --config.user 10001:10001 --config.workingdir /var/lib/voxwire \
        --config.entrypoint /usr/bin/python3 --config.entrypoint -m \
        --config.entrypoint voxwire.cli --config.cmd up \
        --config.env PYTHONPATH=$SITE --config.env PATH=/opt/voxwire/bin:/usr/bin:/bin \
        --config.env HOME=/var/lib/voxwire --config.env VOXWIRE_DATA_DIR=/var/lib/voxwire \
        --config.env VOXWIRE_CACHE_DIR=/opt/voxwire/cache --config.env VOXWIRE_HOST=0.0.0.0 \
        --config.env VOXWIRE_OPUS_LIBRARY=/opt/voxwire/cache/codecs/opus-lace/libopus.so \
        "${env[@]}" --config.exposedports 8000/tcp --config.exposedports 1883/tcp \
        --config.exposedports 8083/tcp >&2
    umoci gc --layout "$oci"
    rm -rf "$bundle"
    tar -C "$oci" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
        -cf "$WORK/$NAME.tar" .
    echo "image: $oci:$TAG ($(du -sh "$oci" | cut -f1)), archive $WORK/$NAME.tar"
    echo "manifest: $(umoci stat --image "$oci:$TAG" --json >/dev/null && sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$oci/index.json")"
}

# podman with runc: crun 1.8 refuses hybrid cgroups, and without CAP_SYS_RESOURCE (as here)
# podman's default limits cannot be set: ask for lower ones
PODMAN=(podman --runtime runc)
LIMITS=(--ulimit nproc=4096:4096 --ulimit "nofile=$(ulimit -n):$(ulimit -Hn)")

smoke() {
    local clip=${1:-$ROOT/../shared/eval/audio/whisper_jfk.flac}
    if [[ ! -f $clip ]]; then
        echo "image.sh: no clip at $clip: give one, scripts/image.sh smoke FILE" >&2
        exit 2
    fi
    need podman runc curl
    [[ -f $WORK/$NAME.tar ]] || build
    "${PODMAN[@]}" load -q -i "$WORK/$NAME.tar" >&2
    if [[ -n $GPU ]]; then
        # the device it would choose here, and where it finds cuBLAS (exit 1 without it)
        "${PODMAN[@]}" run --rm --read-only --cap-drop ALL --security-opt no-new-privileges \
            "${LIMITS[@]}" "localhost/$TAG" devices --need-cuda-libraries
    fi
    # globals: the EXIT trap reads them after this function returns
    name=voxwire-smoke-$$ port=${VOXWIRE_SMOKE_PORT:-18900} data=$(mktemp -d)
    install -d -o 10001 -g 10001 "$data/tmp" "$data/lib"
    trap '"${PODMAN[@]}" rm -f "$name" >/dev/null 2>&1; rm -rf "$data"' EXIT
    "${PODMAN[@]}" run -d --name "$name" --network host --read-only --cap-drop ALL \
        --security-opt no-new-privileges "${LIMITS[@]}" \
        -v "$data/tmp:/tmp" -v "$data/lib:/var/lib/voxwire" "localhost/$TAG" \
        up --http-port "$port" --mqtt-port $((port + 1)) --ws-port $((port + 2)) >/dev/null
    for _ in $(seq 120); do
        curl -sf -m 3 "http://127.0.0.1:$port/readyz" >/dev/null && break
        sleep 1
    done
    curl -sf -m 3 "http://127.0.0.1:$port/readyz" || { "${PODMAN[@]}" logs "$name" >&2; exit 1; }
    echo
    local key
    key=$("${PODMAN[@]}" logs "$name" 2>&1 | grep -o 'vxk_[A-Za-z0-9_-]*' | head -1)
    VOXWIRE_CONFIG_DIR=$data VOXWIRE_URL=http://127.0.0.1:$port VOXWIRE_API_KEY=$key \
        VOXWIRE_MQTT_URL=mqtt://127.0.0.1:$((port + 1)) \
        "$ROOT/.venv/bin/voxwire" transcribe "$clip"
}

case "${1:-}" in
    build)
        variant "${2:-}" || true
        build
        ;;
    smoke)
        if variant "${2:-}"; then smoke "${@:3}"; else smoke "${@:2}"; fi
        ;;
    *)
        sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
