"""The Helm chart as the tests see it: rendered by the real helm (``scripts/helm.sh``,
built from the Go module proxy) and checked by the manifest validator
(``helm/validate``), then read back as YAML."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "voxwire"
VALUES = {
    "default": None,
    "gpu": CHART / "ci" / "gpu-values.yaml",
    "minimal": CHART / "ci" / "minimal-values.yaml",
}
"""The values files `make test` renders, by a short name."""


@dataclass(frozen=True)
class Tools:
    helm: Path
    validate: Path
    kube_version: str


@functools.cache
def tools() -> Tools:
    """helm and the validator, built when missing; a failure in CI, a skip elsewhere
    when Go is not installed."""
    done = subprocess.run(
        [str(ROOT / "scripts" / "helm.sh"), "tools"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        message = f"scripts/helm.sh tools failed ({done.returncode}):\n{done.stderr[-3000:]}"
        if done.returncode == 3 and not os.environ.get("CI"):
            pytest.skip(message)
        pytest.fail(message)
    paths = dict(line.split("=", 1) for line in done.stdout.split() if "=" in line)
    return Tools(Path(paths["helm"]), Path(paths["validate"]), paths["kube_version"])


def values_args(name: str, *sets: str) -> list[str]:
    path = VALUES[name]
    args = ["--values", str(path)] if path else []
    for each in sets:
        args += ["--set", each]
    return args


def helm(*args: str) -> subprocess.CompletedProcess[str]:
    """``helm lint`` or ``helm template`` ARGS, for the Kubernetes version the chart targets."""
    found = tools()
    return subprocess.run(
        [str(found.helm), *args, "--kube-version", found.kube_version],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )


def template(name: str, *sets: str) -> subprocess.CompletedProcess[str]:
    return helm(
        "template", "voxwire", str(CHART), "--namespace", "voxwire", *values_args(name, *sets)
    )


def validate(manifests: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools().validate)], input=manifests, capture_output=True, text=True, check=False
    )


@dataclass(frozen=True)
class Rendered:
    """The objects of one rendering, validated."""

    objects: list[dict[str, Any]]

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, suffix: str) -> dict[str, Any]:
        found = [o for o in self.of(kind) if o["metadata"]["name"].endswith(suffix)]
        assert len(found) == 1, (
            f"{kind} *{suffix}: {[o['metadata']['name'] for o in self.of(kind)]}"
        )
        return found[0]

    def pod_specs(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(object name, pod spec) of every Deployment, StatefulSet and Job."""
        for o in self.objects:
            if o["kind"] in ("Deployment", "StatefulSet", "Job"):
                yield o["metadata"]["name"], o["spec"]["template"]["spec"]

    def containers(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(object/container, container) of every container and init container."""
        for name, pod in self.pod_specs():
            for container in pod.get("initContainers", []) + pod["containers"]:
                yield f"{name}/{container['name']}", container


@functools.cache
def render(name: str, *sets: str) -> Rendered:
    """``helm template`` with the values file ``name`` (and ``--set``s), checked by the
    validator (every object decoded strictly into its API type)."""
    rendered = template(name, *sets)
    assert rendered.returncode == 0, rendered.stderr
    checked = validate(rendered.stdout)
    assert checked.returncode == 0, checked.stderr + checked.stdout
    objects = [o for o in yaml.safe_load_all(rendered.stdout) if o]
    assert len(checked.stdout.splitlines()) == len(objects)  # one "ok" line per object
    return Rendered(objects)
