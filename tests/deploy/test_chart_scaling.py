"""The chart's scaling and wiring: autoscaling on what the code consumes, replicas
bounded by Kafka partitions, disruption budgets and network policies, EMQX wired to
the gateway's hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.routing import APIRoute
from pydantic import SecretStr

from tests.deploy.chart import CHART, helm, render, template
from voxwire.access.tokens import TokenIssuer
from voxwire.core.config import Settings
from voxwire.gateway.emqx import emqx_hooks
from voxwire.store import SqliteStore
from voxwire.wire.pools import Lane, Pool
from voxwire.wire.topics import AUDIO_TOPIC, JOBS_TOPIC


def test_keda_scales_each_pool_on_the_lag_of_the_groups_it_consumes() -> None:
    rendered = render("gpu")  # config.namespace = prod: topics and groups carry "prod."
    triggers = {
        o["metadata"]["name"].rsplit("worker-", 1)[1]: {
            (t["metadata"]["topic"], t["metadata"]["consumerGroup"]) for t in o["spec"]["triggers"]
        }
        for o in rendered.of("ScaledObject")
    }
    tiny, base = Pool("tiny.en", "tiny.en"), Pool("base", "tiny.en")  # the gpu pool runs base
    files = (f"prod.{JOBS_TOPIC}", f"prod.{tiny.group(Lane.FILES)}")
    base_files = (f"prod.{JOBS_TOPIC}", f"prod.{base.group(Lane.FILES)}")
    base_streams = (f"prod.{AUDIO_TOPIC}", f"prod.{base.group(Lane.STREAMS)}")
    assert triggers == {"cpu-files": {files}, "gpu": {base_files, base_streams}}
    for scaled in rendered.of("ScaledObject"):  # KEDA owns the replicas: none in the Deployment
        target = rendered.one("Deployment", scaled["spec"]["scaleTargetRef"]["name"])
        assert "replicas" not in target["spec"]


def test_the_gateway_scales_on_cpu_and_keeps_one_up() -> None:
    rendered = render("default")
    hpa = rendered.one("HorizontalPodAutoscaler", "-gateway")
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert rendered.one("PodDisruptionBudget", "-gateway")["spec"]["minAvailable"] == 1


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        ({"bridge": {"replicas": 13}}, "more than kafka.partitions"),
        ({"pool": {"keda": {"enabled": True, "maxReplicas": 13}}}, "more than kafka.partitions"),
        ({"pool": {"replicas": 7}, "other": {"kind": "all", "replicas": 6}}, "more than kafka"),
        ({"pool": {"model": "base"}}, "model base is not served: add it to config.models"),
        ({"pool": {"kind": "everything"}}, "is not all, files or streams"),
        ({"config": {"blobStore": "local"}}, "sharedVolume.existingClaim"),
    ],
)
def test_the_chart_refuses_what_cannot_work(
    change: dict[str, dict[str, Any]], refusal: str, tmp_path: Path
) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    pools = values["workers"]["pools"]
    for part, fields in change.items():
        target = {"pool": pools[0], "other": pools[1]}.get(part) or values[part]
        for key, value in fields.items():
            if isinstance(value, dict):
                target[key] = {**target[key], **value}
            else:
                target[key] = value
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    refused = helm("template", "voxwire", str(CHART), "--values", str(path))
    assert refused.returncode != 0 and refusal in refused.stderr, refused.stderr


def test_every_deployment_has_a_disruption_budget_and_network_policies_apply() -> None:
    rendered = render("default")
    budgets = {b["metadata"]["name"] for b in rendered.of("PodDisruptionBudget")}
    sets = rendered.of("Deployment") + rendered.of("StatefulSet")
    assert {d["metadata"]["name"] for d in sets} == budgets
    policies = {p["metadata"]["name"].rsplit("-", 1)[1] for p in rendered.of("NetworkPolicy")}
    assert policies == {"default", "gateway"}
    minimal = render("minimal")
    assert not minimal.of("NetworkPolicy") and not minimal.of("PodDisruptionBudget")
    assert not minimal.of("HorizontalPodAutoscaler")


def test_emqx_asks_the_gateway_hooks_over_its_service() -> None:
    rendered = render("gpu")
    emqx = rendered.one("EMQX", "-emqx")
    config = emqx["spec"]["config"]["data"]
    service = rendered.one("Service", "-gateway")
    url = f"http://{service['metadata']['name']}.voxwire.svc:{service['spec']['ports'][0]['port']}"
    router = emqx_hooks(
        SqliteStore(":memory:"), TokenIssuer(bytes(32)), SecretStr("x"), SecretStr("y")
    )
    paths = {route.path for route in router.routes if isinstance(route, APIRoute)}
    assert paths == {"/internal/emqx/authn", "/internal/emqx/authz"}
    for path in paths:  # the routes EMQX calls, on the gateway's Service
        assert f'url = "{url}{path}"' in config
    assert "no_match = deny" in config and "durable_sessions { enable = false }" in config
    assert "listeners.wss.default" in config and 'bytes_rate = "256KB/s"' in config
    settings = rendered.one("ConfigMap", "-settings")["data"]
    assert settings["VOXWIRE_BROKER"] == "emqx"
    assert (
        Settings(broker=settings["VOXWIRE_BROKER"], mqtt_url=settings["VOXWIRE_MQTT_URL"]).broker
        == "emqx"
    )
    pods = emqx["spec"]["coreTemplate"]["metadata"]["labels"].items()
    closed = rendered.one("NetworkPolicy", "-default")["spec"]["podSelector"]["matchLabels"]
    assert not closed.items() <= pods  # the voxwire pods' policy leaves EMQX's listeners open
    hook = emqx["spec"]["coreTemplate"]["spec"]["env"][0]
    assert hook["valueFrom"]["secretKeyRef"]["key"] == "VOXWIRE_HOOK_SECRET"


def test_the_kafka_topics_are_created_before_anything_starts() -> None:
    job = render("default").one("Job", "-kafka-init")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["kafka", "init", "--partitions=12", "--replication-factor=1"]
    assert template("minimal").returncode == 0
    sized = render("default", "kafka.partitions=24", "kafka.replicationFactor=3")
    args = sized.one("Job", "-kafka-init")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[2:] == ["--partitions=24", "--replication-factor=3"]


def test_durable_emqx_sessions_need_a_single_node() -> None:
    refused = template("gpu", "emqx.durableSessions=true")
    assert refused.returncode != 0 and "emqx.replicas to 1" in refused.stderr
    one = render("gpu", "emqx.durableSessions=true", "emqx.replicas=1")
    assert (
        "durable_sessions { enable = true }" in one.one("EMQX", "-emqx")["spec"]["config"]["data"]
    )


def test_each_bridge_keeps_its_name_and_so_its_mqtt_session() -> None:
    # the ingest session is named after the host: a replacement pod must come back
    # under the same name to get the client audio the broker queued for it
    rendered = render("default")
    bridge = rendered.one("StatefulSet", "-bridge")
    assert not [d for d in rendered.of("Deployment") if d["metadata"]["name"].endswith("-bridge")]
    service = rendered.one("Service", "-bridge")
    assert bridge["spec"]["serviceName"] == service["metadata"]["name"]
    assert service["spec"]["clusterIP"] == "None"
    assert (
        service["spec"]["selector"].items()
        <= bridge["spec"]["template"]["metadata"]["labels"].items()
    )
    environment = [
        e["name"]
        for c in bridge["spec"]["template"]["spec"]["containers"]
        for e in c.get("env", [])
    ]
    assert "VOXWIRE_INGEST_CLIENT_ID" not in environment  # the default: named after the pod
