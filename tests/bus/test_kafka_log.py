"""librdkafka's log: a flood of one message during an outage shows once per window."""

from __future__ import annotations

import logging

from voxwire.bus.kafka_options import QuietRepeats


def _record(message: str) -> logging.LogRecord:
    return logging.LogRecord(
        "voxwire.bus.librdkafka", logging.ERROR, __file__, 1, message, (), None
    )


def test_a_repeated_message_passes_once_per_window() -> None:
    quiet = QuietRepeats(window_s=60)
    fail = "FAIL [consumer-2] 127.0.0.1:19092: Connect failed (after {}ms in state CONNECT)"
    passed = [quiet.filter(_record(fail.format(n))) for n in range(100)]
    assert passed == [True] + [False] * 99


def test_different_messages_all_pass() -> None:
    quiet = QuietRepeats(window_s=60)
    assert quiet.filter(_record("FAIL: Connect failed"))
    assert quiet.filter(_record("SESSTMOUT: Consumer group session timed out"))


def test_a_message_passes_again_after_the_window() -> None:
    quiet = QuietRepeats(window_s=0)
    assert quiet.filter(_record("FAIL: Connect failed"))
    assert quiet.filter(_record("FAIL: Connect failed"))
