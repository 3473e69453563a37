#!/usr/bin/env bash
# The Helm chart's tools, built from source with Go (helm is a Go module; no binary is
# downloaded), cached in .cache/ so that later runs reuse them:
#
#   scripts/helm.sh tools      build what is missing: helm (pinned) and the manifest validator
#                              (helm/validate: every rendered object decoded strictly into the
#                              Kubernetes API types); prints `helm=PATH`, `validate=PATH` and
#                              `kube_version=V` (the Kubernetes version to render for)
#   scripts/helm.sh helm ARGS  run the cached helm
#   scripts/helm.sh check      helm lint + helm template | validate, for each values file
#
# Needs `go` on PATH or in /usr/local/go/bin (as root, Debian's golang-go is installed when
# missing; a go older than the modules want fetches their toolchain from the module proxy).
# Knobs: VOXWIRE_TOOLS_DIR (.cache/tools), VOXWIRE_GO_CACHE (.cache/go: modules and builds).
# helm builds once, at low priority (a few minutes on two cores).
set -euo pipefail

HELM_VERSION=v3.21.4
# the cluster version rendered for (a helm built with `go install` assumes 1.20)
KUBE_VERSION=1.31.0
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=${VOXWIRE_TOOLS_DIR:-$ROOT/.cache/tools}
GOCACHE_DIR=${VOXWIRE_GO_CACHE:-$ROOT/.cache/go}
HELM=$TOOLS/helm-$HELM_VERSION/helm
VALIDATE=$TOOLS/voxwire-validate
CHART=$ROOT/helm/voxwire

go_env() {
    export PATH="$PATH:/usr/local/go/bin"
    export GOMODCACHE=$GOCACHE_DIR/mod GOCACHE=$GOCACHE_DIR/build GOFLAGS=-modcacherw
    # an older go fetches the toolchain the modules ask for from the module proxy
    export GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
    if ! command -v go >/dev/null && [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        echo "helm.sh: installing Debian's golang-go" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q golang-go >&2 ||
            { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q golang-go >&2; }
    fi
    if ! command -v go >/dev/null; then
        echo "helm.sh: go is not installed (needed to build helm and the validator)" >&2
        exit 3
    fi
}

build_helm() {
    [[ -x $HELM ]] && return
    go_env
    echo "helm.sh: building helm $HELM_VERSION (once; a few minutes)" >&2
    mkdir -p "$(dirname "$HELM")"
    GOBIN=$(dirname "$HELM") nice -n 19 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
}

build_validate() {
    go_env
    mkdir -p "$TOOLS"
    # incremental: a no-op when nothing changed
    (cd "$ROOT/helm/validate" && nice -n 19 go build -o "$VALIDATE" .) >&2
}

case "${1:-}" in
    tools)
        build_helm
        build_validate
        echo "helm=$HELM"
        echo "validate=$VALIDATE"
        echo "kube_version=$KUBE_VERSION"
        ;;
    helm)
        shift
        build_helm
        exec "$HELM" "$@"
        ;;
    check)
        build_helm
        build_validate
        for values in "" "$CHART/ci/gpu-values.yaml" "$CHART/ci/minimal-values.yaml"; do
            args=()
            [[ -n $values ]] && args=(--values "$values")
            echo "== ${values:-default values}"
            "$HELM" lint --strict --kube-version "$KUBE_VERSION" "$CHART" "${args[@]}"
            "$HELM" template voxwire "$CHART" --namespace voxwire --kube-version "$KUBE_VERSION" \
                "${args[@]}" | "$VALIDATE"
        done
        ;;
    *)
        sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
        exit 2
        ;;
esac
