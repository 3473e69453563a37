"""The Helm chart, as `make test` checks it: `helm lint` and `helm template` for the
default, GPU and minimal values, every object decoded strictly into the Kubernetes API
types, and what matters to an operator: probes reach what the processes serve, GPU pods
get GPUs, secrets never sit in plain values, pods run unprivileged with resources, and
the settings the chart passes are ones voxwire reads."""

from __future__ import annotations

import os
from typing import Any

import pytest
import yaml

from tests.deploy.chart import (
    CHART,
    VALUES,
    Rendered,
    helm,
    render,
    template,
    validate,
    values_args,
)
from voxwire.cli import app
from voxwire.core.config import FLAT_NAMES, GROUPS, Settings, load_settings
from voxwire.core.readiness import HEALTH_PATH, READY_PATH
from voxwire.models.registry import CACHE_ENV

NAMES = sorted(VALUES)
SECRET_KEYS = {
    "VOXWIRE_POSTGRES_DSN",
    "VOXWIRE_REDIS_URL",
    "VOXWIRE_OPENSEARCH_URL",
    "VOXWIRE_MQTT_PASSWORD",
    "VOXWIRE_TOKEN_SECRET",
    "VOXWIRE_HOOK_SECRET",
    "VOXWIRE_EMQX_API_URL",
    "VOXWIRE_S3_ACCESS_KEY",
    "VOXWIRE_S3_SECRET_KEY",
}
PROCESS_PORT = {
    "gateway": "VOXWIRE_HTTP_PORT",
    "worker": "VOXWIRE_METRICS_PORT",
    "bridge": "VOXWIRE_METRICS_PORT",
}
"""The setting each role serves its probes on (the gateway on its HTTP port)."""


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def process_env(rendered: Rendered, container: dict[str, Any]) -> dict[str, str]:
    """What the process in ``container`` finds in its environment (ConfigMap, Secret, env)."""
    found: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            found |= rendered.one("ConfigMap", source["configMapRef"]["name"])["data"]
        elif "secretRef" in source:
            secret = [
                s
                for s in rendered.of("Secret")
                if s["metadata"]["name"] == source["secretRef"]["name"]
            ]
            found |= secret[0]["stringData"] if secret else {k: "x" for k in SECRET_KEYS}
    return found | env_of(container)


STRAY_SERVICE = """
---
apiVersion: v1
kind: Service
metadata: {name: stray}
spec:
  selector: {app: nothing}
  ports: [{port: 80}]
"""
UNSELECTED_DEPLOYMENT = """
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: unselected}
spec:
  selector: {matchLabels: {app: one}}
  template:
    metadata: {labels: {app: other}}
    spec:
      containers: [{name: c, image: busybox}]
"""


@pytest.mark.parametrize("name", NAMES)
def test_helm_lint_passes(name: str) -> None:
    linted = helm("lint", "--strict", str(CHART), *values_args(name))
    assert linted.returncode == 0, linted.stdout + linted.stderr


@pytest.mark.parametrize("name", NAMES)
def test_every_object_decodes_strictly_into_its_kubernetes_type(name: str) -> None:
    rendered = render(name)
    kinds = {o["kind"] for o in rendered.objects}
    assert {"Deployment", "Service", "ConfigMap", "ServiceAccount"} <= kinds
    assert ("Secret" in kinds) == (name != "gpu")  # the GPU values name an existing Secret


def test_the_validator_refuses_what_the_api_server_would() -> None:
    manifests = template("default").stdout
    misspelt = manifests.replace("  replicas: 2\n", "  replica: 2\n", 1)
    refused = validate(misspelt)
    assert refused.returncode == 1 and 'unknown field "replica"' in refused.stderr
    stray = manifests + STRAY_SERVICE
    refused = validate(stray)
    assert (
        refused.returncode == 1
        and '"stray": its selector matches no rendered pod' in refused.stderr
    )
    refused = validate(manifests + UNSELECTED_DEPLOYMENT)
    assert "does not match the pod template's labels" in refused.stderr
    refused = validate(manifests.replace("memory: 256Mi", "memory: 256 MiB", 1))
    assert refused.returncode == 1 and "quantities must match" in refused.stderr
    unknown_kind = (
        manifests + "\n---\napiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n"
    )
    assert "not a kind this chart may render" in validate(unknown_kind).stderr


@pytest.mark.parametrize("name", NAMES)
def test_probes_point_at_the_paths_and_ports_the_processes_serve(name: str) -> None:
    rendered = render(name)
    commands = {
        c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands
    }
    for where, container in rendered.containers():
        role = container["args"][0]
        assert role in commands or role in {g.name for g in app.registered_groups}, where
        if "livenessProbe" not in container:
            continue
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
        assert (live["path"], ready["path"]) == (HEALTH_PATH, READY_PATH), where
        assert live["port"] == ready["port"] and live["port"] in ports, where
        served = int(process_env(rendered, container)[PROCESS_PORT[role]])
        assert ports[live["port"]] == served, (
            f"{where}: probes {ports[live['port']]}, serves {served}"
        )


@pytest.mark.parametrize("name", NAMES)
def test_every_setting_the_chart_passes_is_one_voxwire_reads(name: str) -> None:
    rendered = render(name)
    known = {
        f"VOXWIRE_{n.upper()}"
        for n in [*FLAT_NAMES, *(f for f in Settings.model_fields if f not in GROUPS)]
    }
    known.add(CACHE_ENV)
    for where, container in rendered.containers():
        environment = process_env(rendered, container)
        assert set(environment) <= known, f"{where}: {sorted(set(environment) - known)}"
        saved = dict(os.environ)
        try:
            os.environ.update(
                {k: v for k, v in environment.items() if k not in ("VOXWIRE_CACHE_DIR",)}
            )
            settings = load_settings(mode="distributed")  # refuses a bad value with a ConfigError
        finally:
            os.environ.clear()
            os.environ.update(saved)
        if "livenessProbe" in container:  # a server: it listens beyond the pod
            assert settings.listen.host == "0.0.0.0", where


def test_each_worker_pool_runs_its_device_and_kind() -> None:
    rendered = render("gpu")
    pools = {
        d["metadata"]["name"].rsplit("worker-", 1)[1]: d
        for d in rendered.of("Deployment")
        if "-worker-" in d["metadata"]["name"]
    }
    assert set(pools) == {"cpu-files", "gpu"}
    gpu = env_of(pools["gpu"]["spec"]["template"]["spec"]["containers"][0])
    cpu = env_of(pools["cpu-files"]["spec"]["template"]["spec"]["containers"][0])
    assert (gpu["VOXWIRE_DEVICE"], gpu["VOXWIRE_WORKER_KIND"], gpu["VOXWIRE_COMPUTE_TYPE"]) == (
        "cuda",
        "all",
        "float16",
    )
    assert (cpu["VOXWIRE_DEVICE"], cpu["VOXWIRE_WORKER_KIND"]) == ("cpu", "files")
    assert (cpu["VOXWIRE_SERVE"], gpu["VOXWIRE_SERVE"]) == ("tiny.en", "base")
    settings = rendered.one("ConfigMap", "-settings")["data"]
    served = Settings(
        model=settings["VOXWIRE_MODEL"],
        models=settings["VOXWIRE_MODELS"],
        routes=settings["VOXWIRE_ROUTES"],
        serve=gpu["VOXWIRE_SERVE"],
    )
    assert served.worker_models == ("base",)
    assert served.pools.routes == {"en": "tiny.en", "*": "base"}


@pytest.mark.parametrize("name", NAMES)
def test_gpu_pods_request_gpus_and_tolerate_gpu_nodes(name: str) -> None:
    rendered = render(name)
    gpu_pods = 0
    for where, pod in rendered.pod_specs():
        for container in pod["containers"]:
            device = env_of(container).get("VOXWIRE_DEVICE", "cpu")
            resources = container["resources"]
            gpus = {k: resources.get(k, {}).get("nvidia.com/gpu") for k in ("requests", "limits")}
            if device.startswith("cuda"):
                gpu_pods += 1
                assert gpus["limits"] and gpus["limits"] == gpus["requests"], where
                assert any(t["key"] == "nvidia.com/gpu" for t in pod.get("tolerations", [])), where
                assert pod.get("nodeSelector"), where
            else:
                assert gpus == {"requests": None, "limits": None}, where
    assert gpu_pods == (1 if name == "gpu" else 0)


@pytest.mark.parametrize("name", NAMES)
def test_gpu_pods_run_the_gpu_image(name: str) -> None:
    """A pool with GPUs runs the GPU variant (``make image-gpu``: CUDA's cuBLAS inside),
    init container included; every other pod the plain image."""
    rendered = render(name)
    plain = f"voxwire/voxwire:{app_version()}"
    seen = set()
    for where, pod in rendered.pod_specs():
        gpus = any(
            c["resources"].get("limits", {}).get("nvidia.com/gpu") for c in pod["containers"]
        )
        for container in [*pod.get("initContainers", []), *pod["containers"]]:
            if container["image"].startswith("voxwire/"):
                wanted = f"{plain}-gpu" if gpus else plain
                assert container["image"] == wanted, where
                seen.add(container["image"])
    assert seen == ({plain, f"{plain}-gpu"} if name == "gpu" else {plain})


def app_version() -> str:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return str(chart["appVersion"])


@pytest.mark.parametrize("name", NAMES)
def test_no_secret_is_a_plain_value(name: str) -> None:
    marks = {
        "secrets.postgresDsn": "postgresql://voxwire:pg-MARK@db:5432/voxwire",
        "secrets.redisUrl": "redis://:redis-MARK@redis:6379/0",
        "secrets.mqttPassword": "mqtt-MARK",
        "secrets.tokenSecret": "ab" * 32,
        "secrets.s3SecretKey": "s3-MARK",
    }
    rendered = render(name, *(f"{k}={v}" for k, v in marks.items()))
    for where, container in rendered.containers():
        for entry in container.get("env", []):
            if entry["name"] in SECRET_KEYS:
                assert "secretKeyRef" in entry.get("valueFrom", {}), f"{where}: {entry['name']}"
            assert not any(v in entry.get("value", "") for v in marks.values()), f"{where}: {entry}"
    for config in rendered.of("ConfigMap"):
        assert not SECRET_KEYS & set(config["data"])
        assert not any(v in str(config["data"]) for v in marks.values())
    for emqx in rendered.of("EMQX"):
        for entry in emqx["spec"]["coreTemplate"]["spec"]["env"]:
            assert "value" not in entry and "secretKeyRef" in entry["valueFrom"]


@pytest.mark.parametrize("name", NAMES)
def test_pods_run_unprivileged_with_resources(name: str) -> None:
    rendered = render(name)
    for where, pod in rendered.pod_specs():
        assert pod["securityContext"]["runAsNonRoot"] is True, where
        assert pod["securityContext"]["runAsUser"] != 0, where
        assert pod["automountServiceAccountToken"] is False, where
    for where, container in rendered.containers():
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, where
        assert context["readOnlyRootFilesystem"] is True, where
        assert context["capabilities"]["drop"] == ["ALL"], where
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(container["resources"][kind]), f"{where}: {kind}"
    for emqx in rendered.of("EMQX"):
        spec = emqx["spec"]["coreTemplate"]["spec"]
        assert spec["podSecurityContext"]["runAsNonRoot"] is True
        assert spec["containerSecurityContext"]["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= set(spec["resources"]["limits"])
