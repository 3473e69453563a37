"""Two installations on one broker, each with its namespace (Kafka topics,
PostgreSQL schema, bridge group): every bridge sees every client message, and a
search asked over MQTT is answered once, by the installation that issued the
asking key; a key revoked there gets its error from there alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed import DistributedPlatform, readyz
from tests.helpers import Listener, free_port
from voxwire.access.keys import key_id_of
from voxwire.platform import build
from voxwire_client.api import QueryResult, SearchQuery
from voxwire_client.topics import query_request_topic, query_result_topic

pytestmark = pytest.mark.timeout(240)

SETTLE_S = 5
"""How long a second answer is waited for once the first has come."""


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[DistributedPlatform, DistributedPlatform]]:
    """An installation (bridge and gateway), and the bridge of a second one."""
    from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

    ours = DistributedPlatform(tmp_path / "ours", workers=0).start()
    other = DistributedPlatform(tmp_path / "other", workers=0)
    try:
        kafka_init(
            other.settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=other.namespace
        )
        other.api_key = other.new_tenant_key("default")
        probes = free_port()
        other.spawn("bridge", metrics_port=str(probes))
        readyz(f"http://127.0.0.1:{probes}", until=200)
        yield ours, other
    finally:
        other.stop()
        ours.stop()


def _answers(platform: DistributedPlatform, key: str, qid: str) -> list[QueryResult]:
    """Every answer to one question, asked as a device would."""
    key_id = key_id_of(key)
    assert key_id is not None
    asker = Listener(platform.mqtt_port, key, client_id=f"asker-{qid}")
    assert asker.connect() == 0
    try:
        assert asker.subscribe(query_result_topic(key_id, qid)) == [1]
        body = SearchQuery(q="anything").model_dump_json().encode()
        asker.client.publish(query_request_topic(key_id, qid), body, qos=1).wait_for_publish(10)
        asker.wait_for(lambda got: got, timeout=60)
        time.sleep(SETTLE_S)
        return [QueryResult.model_validate_json(m.payload) for m in asker.messages]
    finally:
        asker.client.disconnect()
        asker.client.loop_stop()


def _revoke_in_store(platform: DistributedPlatform, key: str) -> None:
    """Revoke in PostgreSQL only: the broker still lets the key in, as it does
    until it hears of a revocation."""

    async def revoke() -> None:
        async with build(platform.settings) as running:
            store = await running.adapters.store()
            assert await store.revoke_api_key(key_id_of(key) or "")

    asyncio.run(revoke())


def test_a_query_is_answered_only_by_the_installation_of_its_key(
    two: tuple[DistributedPlatform, DistributedPlatform],
) -> None:
    ours, _ = two
    (answer,) = _answers(ours, ours.api_key, "q1")
    assert answer.error is None and answer.page is not None

    revoked = ours.new_tenant_key("default")
    _revoke_in_store(ours, revoked)
    (refused,) = _answers(ours, revoked, "q2")
    assert refused.error is not None and refused.error.code == "unauthorized"
    assert "revoked" in refused.error.message
