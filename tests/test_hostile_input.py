"""Property-based tests of every parser that takes outside input: topics, wire
messages, API bodies, bus records, checkpoints, search queries, the redactor.
Whatever arrives, each returns a value or raises its own typed error, and
never takes long (hypothesis's per-example deadline catches a hang).

The audio decoder has its own fuzz tests in tests/audio/test_decoding.py; the stream
worker fed with garbage beside a real session is in
tests/workers/stream/test_worker.py."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from voxwire.bridge.ingest import route
from voxwire.core.errors import RecordError
from voxwire.search.query import SearchQueryError, parse_query
from voxwire.search.sqlite_fts import SqliteSearchIndex
from voxwire.text.normalization import normalize
from voxwire.text.redaction import Redactor
from voxwire.wire.records import StreamStart, decode_audio_record
from voxwire.wire.windows import TextWindow
from voxwire.workers.stream.checkpoints import CheckpointError, StreamCheckpoint
from voxwire_client.api import (
    PromptChange,
    PromptSpec,
    SearchQuery,
    StreamRequest,
    TokenRequest,
)
from voxwire_client.errors import InvalidSessionIdError
from voxwire_client.messages import SegmentData, parse_message
from voxwire_client.topics import (
    parse_audio_topic,
    parse_query_topic,
    parse_topic,
    validate_sid,
)

FAST = settings(
    max_examples=300, deadline=timedelta(seconds=2), suppress_health_check=[HealthCheck.too_slow]
)
TOPIC_WORDS = [
    *("audio", "transcription", "query", "chunk", "control", "result", "request"),
    *("+", "#", "..", "", "s1", "\x00", "é", "٣", "²", "0", "00", "-1", "a" * 70),
]
topics = st.lists(st.sampled_from(TOPIC_WORDS) | st.text(max_size=8), max_size=6).map("/".join)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=20,
)


@FAST
@given(st.text(max_size=80))
def test_session_ids_are_safe_or_refused(sid: str) -> None:
    try:
        assert validate_sid(sid) == sid
    except InvalidSessionIdError:
        return
    assert not set(sid) & set("/+#\x00 .") and sid.isascii() and 1 <= len(sid) <= 64


@FAST
@given(topics | st.text(max_size=100))
def test_topics_parse_or_raise_value_error(topic: str) -> None:
    for parse in (parse_audio_topic, parse_query_topic, parse_topic):
        try:
            parsed: Any = parse(topic)
        except ValueError:
            continue
        assert validate_sid(getattr(parsed, "sid", None) or parsed.key_id)
    found = route(topic)
    assert found is None or found[0] in ("transcription.audio", "prompt.queries")


@FAST
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_wire_messages_parse_or_raise_validation_error(data: bytes) -> None:
    try:
        message = parse_message(data)
    except ValidationError:
        return
    validate_sid(message.sid)


def _body_models() -> list[type[BaseModel]]:
    return [StreamRequest, PromptChange, PromptSpec, SearchQuery, TokenRequest, TextWindow]


@FAST
@given(json_values)
def test_request_bodies_validate_or_raise_validation_error(value: object) -> None:
    data = json.dumps(value)
    for model in _body_models():
        with contextlib.suppress(ValidationError):
            model.model_validate_json(data)


@FAST
@given(
    st.fixed_dictionaries(
        {
            "kind": st.sampled_from(["start", "publish", "prompts"]),
            "sid": st.sampled_from(["s1", "a/b", "", "#"]),
            "tenant_id": st.text(max_size=5),
            "request": json_values,
        }
    ).map(lambda d: json.dumps(d).encode())
    | st.binary(max_size=100)
)
def test_audio_records_decode_or_raise_record_error(data: bytes) -> None:
    try:
        record = decode_audio_record(data)
    except RecordError:
        return
    if isinstance(record, StreamStart):
        validate_sid(record.sid)


@FAST
@given(st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_checkpoints_decode_or_raise_checkpoint_error(data: bytes) -> None:
    with contextlib.suppress(CheckpointError):
        StreamCheckpoint.decode(data)


@FAST
@given(st.text(max_size=300))
def test_queries_parse_or_raise_a_query_error(text: str) -> None:
    try:
        parsed = parse_query(text)
    except SearchQueryError:
        return
    assert parsed.all_words


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> SqliteSearchIndex:
    import asyncio
    from datetime import UTC, datetime

    path: Path = tmp_path_factory.mktemp("fuzz") / "search.sqlite3"
    found = SqliteSearchIndex(path)
    segments = [SegmentData(id="s-0", index=0, start_ms=0, end_ms=900, text='ask "not" * NEAR(')]

    async def fill() -> None:
        await found.ensure_index()
        await found.index_segments("t", "s", segments, datetime.now(UTC))

    asyncio.run(fill())
    return found


@FAST
@given(
    st.lists(st.sampled_from([*"\"*():^-+{}[]\\/ NEARORANDNOT?!'é0123", "NEAR(", " OR "])).map(
        "".join
    ),
    st.booleans(),
)
def test_fts5_syntax_in_a_query_is_text_not_an_error(
    index: SqliteSearchIndex, text: str, fuzzy: bool
) -> None:
    import asyncio

    try:
        query = SearchQuery(q=text or "x", fuzzy=fuzzy)
    except ValidationError:
        return
    with contextlib.suppress(SearchQueryError):
        asyncio.run(index.search("t", query))


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


@FAST
@given(st.text(max_size=200) | st.lists(st.sampled_from(
    ["one", "two", "dot", "at", "four", "1", "-", "@", ".", "street", "x", "zero", " ",
     "card", "oh", "for", "my", "number", "4,111", "1234", "a.com"]),
    max_size=40).map(" ".join))  # fmt: skip
def test_the_redactor_finds_spans_inside_the_text(redactor: Redactor, text: str) -> None:
    tail = Redactor.tail(text)
    for partial, numbers in ((False, False), (True, False), (False, True), (True, True)):
        found = redactor.find(text, partial=partial, numbers=numbers, before=tail)
        ends = [0]
        for finding in found:
            assert ends[-1] <= finding.start < finding.end <= len(text)
            ends.append(finding.end)


@FAST
@given(st.text(max_size=200))
def test_normalised_words_point_into_the_text(text: str) -> None:
    for token in normalize(text):
        assert 0 <= token.start <= token.end <= len(text)
