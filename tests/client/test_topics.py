import pytest

from voxwire_client.errors import InvalidSessionIdError
from voxwire_client.topics import TopicKind, new_sid, parse_topic, session_filter, session_topic


@pytest.mark.parametrize(
    "sid", ["", "a/b", "a+b", "a#", "a\x00b", "x" * 65, "ä", " s", "a.b", "..", "s\u200b1"]
)
def test_unsafe_session_ids_are_refused(sid: str) -> None:
    with pytest.raises(InvalidSessionIdError):
        session_topic(sid, TopicKind.RESULT)


def test_round_trip() -> None:
    sid = new_sid()
    topic = session_topic(sid, TopicKind.MATCH)
    assert topic == f"transcription/{sid}/match"
    parsed = parse_topic(topic)
    assert (parsed.sid, parsed.kind) == (sid, TopicKind.MATCH)
    assert session_filter(sid) == f"transcription/{sid}/+"


@pytest.mark.parametrize(
    "topic",
    [
        "transcription/s1",
        "other/s1/result",
        "transcription/s1/x",
        "transcription/s1/result/extra",
        "transcription/+/result",
    ],
)
def test_parse_rejects_other_topics(topic: str) -> None:
    with pytest.raises(ValueError):
        parse_topic(topic)
