"""Requests over MQTT correlated the MQTT 5 way (Mosquitto speaks MQTT 5; the
embedded broker 3.1.1 only, where the qid in the topic correlates): one response
topic for every request, each answer carrying its request's correlation data; a
response topic the key may not read is not used."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from evaluation.distributed import DistributedPlatform
from voxwire.access.keys import key_id_of
from voxwire_client.api import QueryResult
from voxwire_client.topics import query_request_topic, query_result_topic

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DistributedPlatform]:
    running = DistributedPlatform(tmp_path_factory.mktemp("mqtt5"), workers=1).start()
    yield running
    running.stop()


class Mqtt5Device:
    def __init__(self, platform: DistributedPlatform, key: str) -> None:
        key_id = key_id_of(key)
        assert key_id is not None
        self.key_id = key_id
        self.got: list[tuple[str, bytes | None, QueryResult]] = []
        self.arrived = threading.Condition()
        self.client = paho.Client(
            CallbackAPIVersion.VERSION2, client_id="mqtt5-device", protocol=paho.MQTTv5
        )
        self.client.username_pw_set(key_id, key)
        self.client.on_message = self._on_message
        self.client.connect("127.0.0.1", platform.mqtt_port)
        self.client.loop_start()

    def _on_message(self, _c: Any, _u: Any, msg: paho.MQTTMessage) -> None:
        correlation = getattr(msg.properties, "CorrelationData", None)
        with self.arrived:
            self.got.append((msg.topic, correlation, QueryResult.model_validate_json(msg.payload)))
            self.arrived.notify_all()

    def listen(self, topic: str) -> None:
        result, _ = self.client.subscribe(topic, qos=1)
        assert result == paho.MQTT_ERR_SUCCESS

    def ask(self, qid: str, body: dict[str, Any], response_topic: str, correlation: bytes) -> None:
        properties = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        properties.ResponseTopic = response_topic
        properties.CorrelationData = correlation
        self.client.publish(
            query_request_topic(self.key_id, qid),
            json.dumps(body),
            qos=1,
            properties=properties,
        ).wait_for_publish(10)

    def wait(self, count: int, timeout: float = 60) -> list[tuple[str, bytes | None, QueryResult]]:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.got) >= count, timeout), self.got
            return list(self.got)


def test_answers_come_on_the_response_topic_with_their_correlation_data(
    platform: DistributedPlatform,
) -> None:
    device = Mqtt5Device(platform, platform.api_key)
    replies = query_result_topic(device.key_id, "replies")
    device.listen(replies)
    device.listen(query_result_topic(device.key_id, "r3"))
    time.sleep(0.5)  # the SUBACKs first
    device.ask("r1", {"op": "open_stream"}, replies, b"first")
    device.ask("r2", {"q": "anything"}, replies, b"second")
    got = device.wait(2)
    by_correlation = {correlation: (topic, result) for topic, correlation, result in got}
    assert set(by_correlation) == {b"first", b"second"}
    assert all(topic == replies for topic, _ in by_correlation.values())
    opened = by_correlation[b"first"][1]
    assert opened.qid == "r1" and opened.stream is not None and opened.stream.sid
    searched = by_correlation[b"second"][1]
    assert searched.qid == "r2" and searched.page is not None

    # a response topic the key may not read: the answer goes to the request's own topic
    other = query_result_topic("someoneelse", "x")
    device.ask("r3", {"q": "anything"}, other, b"third")
    topic, correlation, result = device.wait(3)[2]
    assert topic == query_result_topic(device.key_id, "r3") and result.qid == "r3"
    assert correlation == b"third"
    device.client.disconnect()
    device.client.loop_stop()
