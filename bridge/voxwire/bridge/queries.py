"""Requests over MQTT: a search, or a session's request (open a live stream,
read a transcript), from ``prompt.queries``; answers on the broker.

A client publishes a :class:`~voxwire_client.api.SearchQuery`, an
:class:`~voxwire_client.api.OpenStream`, a
:class:`~voxwire_client.api.GetTranscript` or a
:class:`~voxwire_client.api.DeleteSession` on ``query/<key id>/<qid>/request``
(the id of its own API key: the broker lets each key use its own query topics
and no others) and subscribes to ``query/<key id>/<qid>/result``. The ingest
moves requests onto the ``prompt.queries`` topic (key = key id); this service
answers each with a :class:`~voxwire_client.api.QueryResult` (a page of hits,
the stream opened, the transcript, or an error), published QoS 1 and retained
for ``RESULT_EXPIRY_S`` so a client that subscribes after asking still gets it.
Everything is scoped to the tenant of the key, looked up when the request is
served: a key revoked meanwhile gets an error. A device key may open streams
and read the transcripts of the sessions it opened; a search, or another
session's transcript, is answered with an error (``forbidden``, ``not_found``).
A request is committed once its answer is acknowledged by the broker.

Delivery is at least once, so a request may be served twice (after a restart):
a search is answered again, and a stream request opens its stream once, since
its sid is derived from the key and the qid (asking again with the same qid
answers with the same stream while it runs, and with ``conflict`` once it
ended). With MQTT alone a device can thus open a stream, publish its audio and
prompt changes on the session's audio topics, end it, and read its transcript.
It can upload a recorded file too, in parts on ``query/<key id>/<upload id>/part/<n>``
(:mod:`voxwire.sessions.parts`): :class:`~voxwire_client.api.UploadStatus` says
which parts are held (to resume after a reconnect), and
:class:`~voxwire_client.api.FinishUpload` turns them into a session.

MQTT 5 clients may correlate the MQTT 5 way instead: a request with a response
topic (one of the key's result topics, e.g. ``query/<key id>/replies/result``
for every request) and correlation data is answered on that topic, with that
correlation data (MQTT 3.1.1 clients: the qid in the topic is the correlation).

Several installations may share one broker (each with its own namespace on
Kafka, and its own bridge group on the broker), so every bridge sees every
request. A request under a key this installation never issued belongs to
another one: it is left unanswered here, for the installation that issued the
key to answer.
"""

from __future__ import annotations

import json
import logging
from typing import Protocol

from pydantic import TypeAdapter, ValidationError

from voxwire.access.keys import KeyGrant, device_refusal
from voxwire.access.rules import key_principal, owns
from voxwire.bus import Bus, Record, commit_or_warn
from voxwire.core.config import Settings
from voxwire.core.errors import NotFoundError, RecordError, VoxwireError
from voxwire.search import SearchIndex
from voxwire.sessions.deletion import Actor, Reason, SessionEraser
from voxwire.sessions.parts import PartUploads, stream_sid
from voxwire.sessions.quotas import quota_detail
from voxwire.sessions.streams import StreamService
from voxwire.sessions.views import endpoints, session_info, stream_created, transcript_of
from voxwire.store import Store
from voxwire.wire.records import decode_client_publish
from voxwire.wire.topics import QUERIES_TOPIC
from voxwire_client.api import (
    DeleteSession,
    ErrorBody,
    FinishUpload,
    GetTranscript,
    OpenStream,
    QueryResult,
    SearchQuery,
    SessionCreated,
    SessionDeleted,
    SessionRequest,
    UploadStatus,
)
from voxwire_client.topics import QueryTopic, parse_query_topic, query_result_topic
from voxwire_client.usage import QuotaExceeded

log = logging.getLogger(__name__)

QUERIES_GROUP = "voxwire-queries"
RESULT_EXPIRY_S = 60


Request = OpenStream | GetTranscript | UploadStatus | FinishUpload | DeleteSession
_SESSION_REQUEST: TypeAdapter[Request] = TypeAdapter(SessionRequest)


def parse_request(payload: bytes) -> SearchQuery | Request:
    """A session's request when the body names an ``op``, else a search; raises
    ValidationError (also for a body that is not JSON)."""
    try:
        body = json.loads(payload)
    except ValueError:
        body = None
    if isinstance(body, dict) and "op" in body:
        return _SESSION_REQUEST.validate_json(payload)
    return SearchQuery.model_validate_json(payload)


def answer_topic(response_topic: str | None, key_id: str) -> str | None:
    """An MQTT 5 response topic the answer may go to: a result topic of the
    asking key (``query/<key id>/<any>/result``), the only ones it may read;
    anything else is ignored (the answer goes to the request's own result topic)."""
    if response_topic is None:
        return None
    try:
        parsed = parse_query_topic(response_topic)
    except ValueError:
        parsed = None
    if parsed is None or parsed.key_id != key_id or parsed.kind != "result":
        log.warning("response topic %r is not one of key %s's; ignored", response_topic, key_id)
        return None
    return response_topic


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
        correlation: bytes | None = None,
    ) -> None: ...


class QueryService:
    def __init__(
        self,
        bus: Bus,
        store: Store,
        index: SearchIndex,
        publisher: ResultPublisher,
        streams: StreamService,
        parts: PartUploads,
        settings: Settings,
        eraser: SessionEraser,
    ) -> None:
        self._bus = bus
        self._store = store
        self._index = index
        self._publisher = publisher
        self._streams = streams
        self._parts = parts
        self._settings = settings
        self._eraser = eraser
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
        if topic.kind == "part":
            result = await self._take_part(topic, published.payload)
        else:
            result = await self._answer(topic.key_id, topic.qid, published.payload)
        if result is None:  # a part kept, or a key of another installation
            return
        await self._publisher.publish_async(
            answer_topic(published.response_topic, topic.key_id)
            or query_result_topic(topic.key_id, topic.qid),
            result.model_dump_json(exclude_none=True).encode(),
            qos=1,
            retain=True,
            expiry_s=RESULT_EXPIRY_S,
            correlation=published.correlation,
        )
        self.answered += 1

    async def _key(self, key_id: str, qid: str) -> KeyGrant | QueryResult | None:
        """What ``key_id`` acts as; else the error to answer, or None for a key
        of another installation (left to it)."""
        key = await self._store.active_key(key_id)
        if key is not None:
            return key
        if not await self._store.key_issued(key_id):
            log.debug("query %s: key %s was not issued here; left to its own", qid, key_id)
            return None
        return _error(qid, "unauthorized", "the API key was revoked")

    async def _take_part(self, topic: QueryTopic, data: bytes) -> QueryResult | None:
        """Keep a part of a file uploaded over MQTT; only a part that cannot be
        kept is answered (with its error, on its upload's result topic: None
        when there is nothing to answer)."""
        key = await self._key(topic.key_id, topic.qid)
        if not isinstance(key, KeyGrant):
            return key
        assert topic.part is not None
        try:
            await self._parts.put(topic.key_id, topic.qid, topic.part, data)
        except VoxwireError as exc:
            return _error(topic.qid, exc.code, exc.message, exc.hint)
        return None

    async def _answer(self, key_id: str, qid: str, payload: bytes) -> QueryResult | None:
        """The answer, or None for a key of another installation."""
        key = await self._key(key_id, qid)
        if not isinstance(key, KeyGrant):
            return key
        try:
            request = parse_request(payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "body"
            return _error(qid, "invalid_request", f"{where}: {first['msg']}")
        try:
            if isinstance(request, SearchQuery):
                if key.device:
                    raise device_refusal("searching")
                return QueryResult(qid=qid, page=await self._index.search(key.tenant_id, request))
            return await self._session_request(key, qid, request)
        except VoxwireError as exc:
            if exc.code == "search":
                log.error("query %s failed: %s", qid, exc)
            return _error(qid, exc.code, exc.message, exc.hint, exc.sid, quota_detail(exc))

    async def _session_request(self, key: KeyGrant, qid: str, request: Request) -> QueryResult:
        if isinstance(request, UploadStatus):
            return QueryResult(qid=qid, upload=await self._parts.status(key.key_id, request.upload))
        if isinstance(request, OpenStream | FinishUpload):
            tenant = await self._store.get_tenant(key.tenant_id)
            if tenant is None:
                raise NotFoundError("the key's tenant is gone")
            if isinstance(request, FinishUpload):
                session = await self._parts.finish(tenant, key, request)
                log.info("upload %s finished over MQTT (key %s)", session.sid, key.key_id)
                where = endpoints(self._settings, session.sid)
                created = SessionCreated(**session_info(session).model_dump(), endpoints=where)
                return QueryResult(qid=qid, session=created)
            sid = stream_sid(key.key_id, qid)
            session = await self._streams.start(tenant, request.stream, sid=sid, key=key)
            log.info("stream %s opened over MQTT (key %s)", session.sid, key.key_id)
            return QueryResult(qid=qid, stream=stream_created(self._settings, session))
        if isinstance(request, DeleteSession):
            return await self._delete(key, qid, request.sid)
        found = await self._store.get_session(request.sid)
        if found is None or not owns(key_principal(key), found.owner):
            raise NotFoundError(f"no session {request.sid}", sid=request.sid)
        return QueryResult(qid=qid, transcript=await transcript_of(self._store, found))

    async def _delete(self, key: KeyGrant, qid: str, sid: str) -> QueryResult:
        """Delete a session of the key's (a device key: one it opened); asked
        again (at least once delivery), a deleted session answers the same."""
        state = await self._store.session_state(sid)
        if state is None or not owns(key_principal(key), state.session.owner):
            raise NotFoundError(f"no session {sid}", sid=sid)
        await self._eraser.delete(state, Actor(key.tenant_id, key.key_id), Reason.REQUEST)
        log.info("session %s deleted over MQTT (key %s)", sid, key.key_id)
        return QueryResult(qid=qid, deleted=SessionDeleted(sid=sid))


def _error(
    qid: str,
    code: str,
    message: str,
    hint: str | None = None,
    sid: str | None = None,
    quota: QuotaExceeded | None = None,
) -> QueryResult:
    """An error answer (over a quota: naming it, as the gateway's 429 does)."""
    error = ErrorBody(code=code, message=message, hint=hint, sid=sid, quota=quota)
    return QueryResult(qid=qid, error=error)
