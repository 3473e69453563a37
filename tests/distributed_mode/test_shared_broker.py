"""Two installations on one broker, each with its namespace (Kafka topics,
PostgreSQL schema, bridge group): every bridge sees every client message, and a
search asked over MQTT is answered once, by the installation that issued the
asking key; a key revoked there gets its error from there alone. A live
stream's audio reaches the Kafka audio topic of its own installation alone."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from evaluation.corpus import UTTERANCES, eval_items, pcm16
from evaluation.distributed import DistributedPlatform, wait_for_workers
from evaluation.ports import free_port
from tests.distributed import readyz
from tests.helpers import Listener
from voxwire.access.keys import key_id_of
from voxwire.audio.decoding import decode
from voxwire.platform import build
from voxwire.wire.records import ClientPublish, decode_audio_record
from voxwire.wire.topics import AUDIO_TOPIC, QUERIES_TOPIC
from voxwire_client import Client, pcm_chunks
from voxwire_client.api import OpenStream, QueryResult, SearchQuery
from voxwire_client.topics import (
    audio_chunk_prefix,
    audio_control_topic,
    query_request_topic,
    query_result_topic,
)

pytestmark = pytest.mark.timeout(240)

SETTLE_S = 5
"""How long a second answer is waited for once the first has come."""


class Two:
    """An installation (bridge, worker, gateway), and the bridge of a second one
    (its probes and metrics at ``other_probes``)."""

    def __init__(self, ours: DistributedPlatform, other: DistributedPlatform, probes: str) -> None:
        self.ours = ours
        self.other = other
        self.other_probes = probes


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Two]:
    from voxwire.bus.topics import DEFAULT_TOPICS, kafka_init

    tmp = tmp_path_factory.mktemp("shared-broker")
    ours = DistributedPlatform(tmp / "ours", workers=1).start()
    other = DistributedPlatform(tmp / "other", workers=0)
    try:
        kafka_init(
            other.settings.servers.kafka_bootstrap, DEFAULT_TOPICS, namespace=other.namespace
        )
        other.api_key = other.new_tenant_key("default")
        probes = f"http://127.0.0.1:{free_port()}"
        other.spawn("bridge", metrics_port=probes.rsplit(":", 1)[1])
        other.spawn("worker-0", stream_engines="1")  # its streams are opened only if served
        readyz(probes, until=200)
        wait_for_workers(other.settings.servers.kafka_bootstrap, other.namespace)
        yield Two(ours, other, probes)
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


def test_a_query_is_answered_only_by_the_installation_of_its_key(two: Two) -> None:
    ours = two.ours
    (answer,) = _answers(ours, ours.api_key, "q1")
    assert answer.error is None and answer.page is not None
    # and only its Kafka log holds the question (the other's ingest dropped it)
    key_id = key_id_of(ours.api_key)
    assert key_id in {key for key, _ in _log(ours, QUERIES_TOPIC)}
    assert key_id not in {key for key, _ in _log(two.other, QUERIES_TOPIC)}

    revoked = ours.new_tenant_key("default")
    _revoke_in_store(ours, revoked)
    (refused,) = _answers(ours, revoked, "q2")
    assert refused.error is not None and refused.error.code == "unauthorized"
    assert "revoked" in refused.error.message


def test_a_streams_audio_goes_to_its_own_installations_kafka_alone(two: Two) -> None:
    ours, other = two.ours, two.other
    # the other installation: a stream opened over MQTT alone, its audio published
    # as soon as its sid is known (no chunk of it may be taken for a stranger's)
    device = _OtherDevice(other)
    try:
        theirs = device.open_stream()
        for n in range(5):
            device.publish(f"{audio_chunk_prefix(theirs)}/{n}", bytes(3200))

        # ours: a stream that streams and completes here
        items = {item.id: item for item in eval_items()}
        samples = decode(items[UTTERANCES[0]].path.read_bytes()).samples
        pcm = pcm16(np.concatenate([samples, np.zeros(16000, dtype=np.float32)]))
        with Client(ours.url, ours.api_key, ours.mqtt_url) as client:
            transcript = client.stream(pcm_chunks(pcm), speed=4)
        assert transcript.segments and transcript.text.strip()

        # the other stream ends after ours: once its end is in the other's log, the
        # other's ingest has had all of our stream's audio
        device.publish(audio_control_topic(theirs), b'{"type": "end"}')
        deadline = time.monotonic() + 60
        while audio_control_topic(theirs) not in _client_topics(_audio_log(other), theirs):
            assert time.monotonic() < deadline, "the other stream's end never reached its log"
            time.sleep(0.5)
    finally:
        device.close()

    their_log, our_log = _audio_log(other), _audio_log(ours)
    assert transcript.sid not in {key for key, _ in their_log}
    assert _client_topics(their_log, theirs) == [
        *(f"{audio_chunk_prefix(theirs)}/{n}" for n in range(5)),
        audio_control_topic(theirs),
    ]
    assert theirs not in {key for key, _ in our_log}
    ours_published = _client_topics(our_log, transcript.sid)
    assert len(ours_published) == len(list(pcm_chunks(pcm))) + 1  # every chunk, and the end
    metrics = httpx.get(f"{two.other_probes}/metrics", timeout=10).text
    dropped = [line for line in metrics.splitlines() if line.startswith("voxwire_ingest_foreign")]
    assert dropped and float(dropped[0].split()[-1]) >= len(ours_published)  # and other runs'


class _OtherDevice:
    """A device of the other installation, on MQTT alone (its key)."""

    def __init__(self, platform: DistributedPlatform) -> None:
        self._key = platform.api_key
        self._key_id = key_id_of(self._key) or ""
        self._mqtt = Listener(platform.mqtt_port, self._key, client_id="device-other")
        assert self._mqtt.connect() == 0

    def open_stream(self) -> str:
        qid = "open-" + secrets.token_hex(3)
        assert self._mqtt.subscribe(query_result_topic(self._key_id, qid)) == [1]
        request = OpenStream(op="open_stream").model_dump_json().encode()
        self.publish(query_request_topic(self._key_id, qid), request)
        (answer,) = self._mqtt.wait_for(lambda got: got, timeout=60)
        result = QueryResult.model_validate_json(answer.payload)
        assert result.stream is not None, result
        return result.stream.sid

    def publish(self, topic: str, payload: bytes) -> None:
        self._mqtt.client.publish(topic, payload, qos=1).wait_for_publish(10)

    def close(self) -> None:
        self._mqtt.close()


def _audio_log(platform: DistributedPlatform) -> list[tuple[str, bytes]]:
    """Every record of the installation's Kafka audio topic: (key, value)."""
    return _log(platform, AUDIO_TOPIC)


def _log(platform: DistributedPlatform, name: str) -> list[tuple[str, bytes]]:
    """Every record of the installation's Kafka topic ``name``: (key, value)."""
    topic = f"{platform.namespace}.{name}"
    consumer = Consumer(
        {
            "bootstrap.servers": platform.settings.servers.kafka_bootstrap,
            "group.id": "reader-" + secrets.token_hex(4),
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {}
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > low:
                ends[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        records: list[tuple[str, bytes]] = []
        while ends:
            record = consumer.poll(10)
            assert record is not None, f"{topic}: records missing before {ends}"
            assert record.error() is None, record.error()
            records.append(((record.key() or b"").decode(), record.value() or b""))
            if (record.offset() or 0) + 1 >= ends.get(record.partition() or 0, 0):
                ends.pop(record.partition() or 0, None)
        return records
    finally:
        consumer.close()


def _client_topics(log: list[tuple[str, bytes]], sid: str) -> list[str]:
    """The MQTT topics of what clients published for ``sid``, in the log's order."""
    decoded = (decode_audio_record(value) for key, value in log if key == sid)
    return [record.topic for record in decoded if isinstance(record, ClientPublish)]
