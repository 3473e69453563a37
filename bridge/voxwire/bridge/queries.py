"""Search over MQTT: requests from ``prompt.queries``, answers on the broker.

A client publishes a :class:`~voxwire_client.api.SearchQuery` on
``query/<key id>/<qid>/request`` (the id of its own API key: the broker lets
each key use its own query topics and no others) and subscribes to
``query/<key id>/<qid>/result``. The ingest moves requests onto the
``prompt.queries`` topic (key = key id); this service answers each with a
:class:`~voxwire_client.api.QueryResult` (a page of hits, or an error),
published QoS 1 and retained for ``RESULT_EXPIRY_S`` so a client that
subscribes after asking still gets it. The search is scoped to the tenant of
the key, looked up when the request is served: a key revoked meanwhile gets
an error. A request is committed once its answer is acknowledged by the broker.

Several installations may share one broker (each with its own namespace on
Kafka, and its own bridge group on the broker), so every bridge sees every
request. A request under a key this installation never issued belongs to
another one: it is left unanswered here, for the installation that issued the
key to answer.
"""

from __future__ import annotations

import logging
from typing import Protocol

from pydantic import ValidationError

from voxwire.bus import Bus, Record, commit_or_warn
from voxwire.core.errors import RecordError, VoxwireError
from voxwire.search import SearchIndex
from voxwire.wire.records import decode_client_publish
from voxwire.wire.topics import QUERIES_TOPIC
from voxwire_client.api import ErrorBody, QueryResult, SearchQuery
from voxwire_client.topics import parse_query_topic, query_result_topic

log = logging.getLogger(__name__)

QUERIES_GROUP = "voxwire-queries"
RESULT_EXPIRY_S = 60


class KeyLookup(Protocol):
    async def key_tenant(self, key_id: str) -> str | None: ...
    async def key_issued(self, key_id: str) -> bool: ...


class ResultPublisher(Protocol):
    async def publish_async(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = True,
        expiry_s: int | None = None,
        timeout_s: float | None = None,
    ) -> None: ...


class QueryService:
    def __init__(
        self, bus: Bus, keys: KeyLookup, index: SearchIndex, publisher: ResultPublisher
    ) -> None:
        self._bus = bus
        self._keys = keys
        self._index = index
        self._publisher = publisher
        self.answered = 0

    async def run(self) -> None:
        subscription = self._bus.subscribe(QUERIES_TOPIC, QUERIES_GROUP)
        try:
            while True:
                record = await subscription.next()
                await self._serve(record)
                await commit_or_warn(subscription, [record])
        finally:
            await subscription.close()

    async def _serve(self, record: Record) -> None:
        try:
            published = decode_client_publish(record.value)
            topic = parse_query_topic(published.topic)
        except (RecordError, ValueError):
            log.warning("query service: malformed record (key %s)", record.key)
            return
        result = await self._answer(topic.key_id, topic.qid, published.payload)
        if result is None:
            log.debug(
                "query %s: key %s was not issued here; left to its own", topic.qid, topic.key_id
            )
            return
        await self._publisher.publish_async(
            query_result_topic(topic.key_id, topic.qid),
            result.model_dump_json(exclude_none=True).encode(),
            qos=1,
            retain=True,
            expiry_s=RESULT_EXPIRY_S,
        )
        self.answered += 1

    async def _answer(self, key_id: str, qid: str, payload: bytes) -> QueryResult | None:
        """The answer, or None for a key of another installation."""
        tenant_id = await self._keys.key_tenant(key_id)
        if tenant_id is None:
            if not await self._keys.key_issued(key_id):
                return None
            return _error(qid, "unauthorized", "the API key was revoked")
        try:
            query = SearchQuery.model_validate_json(payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            return _error(qid, "invalid_request", f"{where}: {first['msg']}")
        try:
            page = await self._index.search(tenant_id, query)
        except VoxwireError as exc:
            if exc.code == "search":
                log.error("query %s failed: %s", qid, exc)
            return _error(qid, exc.code, exc.message, exc.hint)
        return QueryResult(qid=qid, page=page)


def _error(qid: str, code: str, message: str, hint: str | None = None) -> QueryResult:
    return QueryResult(qid=qid, error=ErrorBody(code=code, message=message, hint=hint))
