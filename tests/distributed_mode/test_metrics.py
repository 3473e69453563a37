"""Every process of distributed mode serves Prometheus metrics: after one upload,
a scrape of the gateway (its HTTP port), the worker and the bridge (their
``metrics_port``) shows what an operator watches, and it moved: requests and
errors by code, jobs, queue wait and engine time, relayed messages and their
delivery latency, Kafka consumer lag."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from evaluation.corpus import EVAL_DIR
from evaluation.distributed import DistributedPlatform, wait_for_workers
from evaluation.ports import free_port
from voxwire.core.readiness import METRICS_PATH
from voxwire_client import Client

pytestmark = pytest.mark.timeout(300)

Families = dict[str, Metric]


def scrape(url: str) -> Families:
    answer = httpx.get(f"{url}{METRICS_PATH}", timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return {family.name: family for family in text_string_to_metric_families(answer.text)}


def value(families: Families, sample: str, **labels: str) -> float:
    """The sum of ``sample``'s values whose labels include ``labels``."""
    family = sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")
    assert family in families, f"{family} not exported; have {sorted(families)}"
    return sum(
        s.value
        for s in families[family].samples
        if s.name == sample and labels.items() <= s.labels.items()
    )


def scrape_until(url: str, ready: Callable[[Families], bool], timeout: float = 30) -> Families:
    """Scrape until ``ready`` holds (counters settle a moment after the client has its
    transcript; librdkafka reports lag every few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        families = scrape(url)
        if ready(families) or time.monotonic() > deadline:
            return families
        time.sleep(0.5)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Families]]:
    """One upload through a cluster whose worker and bridge serve metrics; then
    the scrape of each process."""
    from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

    platform = DistributedPlatform(tmp_path_factory.mktemp("metrics"), workers=0)
    try:
        settings = platform.settings
        kafka_init(settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=platform.namespace)
        platform.api_key = platform.new_tenant_key("default")
        urls = {"gateway": platform.url}
        for name in ("bridge", "worker-0"):
            port = free_port()
            platform.spawn(name, metrics_port=str(port))
            urls[name] = f"http://127.0.0.1:{port}"
        platform.spawn("gateway")
        platform.wait_ready()
        wait_for_workers(platform.settings.servers.kafka_bootstrap, platform.namespace)
        yield _run_and_scrape(platform, urls, EVAL_DIR / "audio" / "whisper_jfk.flac")
    except BaseException:
        print(platform.digest())
        raise
    finally:
        platform.stop()


def _run_and_scrape(
    platform: DistributedPlatform, urls: dict[str, str], audio: Path
) -> dict[str, Families]:
    headers = {"Authorization": f"Bearer {platform.api_key}"}
    with Client(platform.url, platform.api_key, platform.mqtt_url) as client:
        result = client.transcribe(audio)
    assert result.text
    missing = httpx.get(f"{platform.url}/v1/sessions/nosuchsession", headers=headers, timeout=10)
    assert missing.status_code == 404
    return {
        "gateway": scrape(urls["gateway"]),
        "worker-0": scrape_until(
            urls["worker-0"],
            lambda f: (
                value(f, "voxwire_jobs_total", outcome="done") >= 1
                and _lag_of(f, "transcription.jobs")
            ),
        ),
        "bridge": scrape_until(
            urls["bridge"],
            lambda f: (
                value(f, "voxwire_delivery_latency_seconds_count") > 0
                and _lag_of(f, "transcription.results")
            ),
        ),
    }


def _lag_of(families: Families, topic: str) -> list[float]:
    """The consumer lag of ``topic`` (namespaced) the scrape reports, per group."""
    lag = families.get("voxwire_kafka_consumer_lag")
    return [s.value for s in lag.samples if s.labels["topic"].endswith(topic)] if lag else []


def test_the_gateway_counts_requests_latency_and_errors_by_code(
    scraped: dict[str, Families],
) -> None:
    gateway = scraped["gateway"]
    upload = {"route": "/v1/sessions", "method": "POST", "status": "201"}
    assert value(gateway, "voxwire_http_requests_total", **upload) == 1
    assert value(gateway, "voxwire_http_request_seconds_count", route="/v1/sessions") >= 1
    assert value(gateway, "voxwire_http_requests_total", status="404") >= 1
    assert value(gateway, "voxwire_errors_total", code="not_found") >= 1


def test_the_worker_counts_jobs_queue_wait_and_engine_time(scraped: dict[str, Families]) -> None:
    worker = scraped["worker-0"]
    assert value(worker, "voxwire_jobs_total", outcome="done") == 1
    assert value(worker, "voxwire_jobs_in_flight") == 0
    assert value(worker, "voxwire_job_queue_wait_seconds_count") == 1
    assert value(worker, "voxwire_job_seconds_count") == 1
    assert value(worker, "voxwire_job_seconds_sum") > 0
    assert value(worker, "voxwire_engine_realtime_factor_count") == 1
    assert "voxwire_live_streams" in worker  # the stream worker runs beside the file worker
    assert _lag_of(worker, "transcription.jobs"), worker.get("voxwire_kafka_consumer_lag")


def test_the_bridge_counts_relayed_messages_and_delivery_latency(
    scraped: dict[str, Families],
) -> None:
    bridge = scraped["bridge"]
    assert value(bridge, "voxwire_relayed_messages_total", type="final") >= 1
    assert value(bridge, "voxwire_relayed_messages_total", type="transcript") == 1
    delivered = value(bridge, "voxwire_delivery_latency_seconds_count")
    assert delivered == value(bridge, "voxwire_relayed_messages_total")
    assert "voxwire_final_latency_seconds" in bridge  # live finals only: none here
    assert "voxwire_ingested_messages" in bridge
    assert _lag_of(bridge, "transcription.results"), bridge.get("voxwire_kafka_consumer_lag")
