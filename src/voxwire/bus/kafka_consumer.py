"""Consuming from Kafka: :class:`KafkaSubscription`, one consumer of a group.

One thread owns each consumer (librdkafka's consumer takes one caller at a
time; confluent-kafka serialises calls, so a commit would wait behind a
blocked poll)::

    event loop                          consumer thread
    next() / next_batch()  -- fetch --> poll; records started in the OffsetTracker
    commit(*records)       -- finish -> OffsetTracker.finished; commit (coalesced, async)
    close()                -- close --> last commit, consumer.close() (leaves the group)

Commits never skip work: :class:`~voxwire.bus.offsets.OffsetTracker` commits
the lowest offset still in flight, so N jobs of one partition may run at once.
``commit`` returns once the broker has stored a position covering the record
(or at once when an earlier record of its partition is still in flight).
Commits that arrive together are sent as one request: callers that finish
many records should pass them to one ``commit`` call. Commits are sent
asynchronously (librdkafka's ``on_commit`` reports the outcome while the thread
keeps fetching), so a slow commit never holds up the next records: measured
with a synchronous commit per batch, produce-to-consume p99 at 2.6k records/s
was 309 ms. The bookkeeping is :class:`~voxwire.bus.kafka_commits.Commits`.

Between requests the thread keeps polling (every ``keepalive_s``), so the group
sees the member alive and rebalances are served even while every engine of a
worker is busy and nobody calls ``next``. A record fetched then is held for the
next call and the partitions are paused, so nothing more is fetched.
``max.poll.interval.ms`` is thus only a backstop for a stuck consumer thread.
A partition revoked by a rebalance is forgotten: its records still in flight
are not committed, and its new owner delivers them again (at least once).
A consumer that lost its partitions and has not got any back within
``rejoin_s`` is replaced by a new one (:mod:`voxwire.bus.kafka_membership`), and
so is one that was asked for records and got none for ``idle_s`` while its
partitions have records waiting (the broker's end offsets lie past its
positions): a fetcher that stopped without an error.
``voxwire_kafka_consumer_renewals{reason}`` counts both.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from voxwire.bus.base import Record
from voxwire.bus.kafka_commits import COMMIT_POLL_S, Commits, settle
from voxwire.bus.kafka_membership import Membership, close_in_background, stack_of
from voxwire.bus.kafka_options import KafkaOptions, kafka_error
from voxwire.bus.kafka_stats import STATS_INTERVAL_MS, LagGauge
from voxwire.core.errors import BusError
from voxwire.core.metrics import CONSUMER_RENEWALS

log = logging.getLogger(__name__)

_TOPICS_HINT = "create the topics first: voxwire.bus.topics.kafka_init"


@dataclass(slots=True)
class _Fetch:
    future: asyncio.Future[list[Record]]
    max_records: int


@dataclass(slots=True)
class _Finish:
    future: asyncio.Future[None]
    records: tuple[Record, ...]


@dataclass(slots=True)
class _Close:
    future: asyncio.Future[None]


_Command = _Fetch | _Finish | _Close


def _seconds(timestamp: tuple[int, int]) -> float | None:
    """A Kafka message timestamp (type, ms) in seconds; None when it has none."""
    kind, ms = timestamp
    return None if kind == TIMESTAMP_NOT_AVAILABLE else ms / 1000


def _answer(command: _Command, error: BusError) -> None:
    """Answer a command the consumer thread will not run: a close succeeds."""
    future: asyncio.Future[Any] = command.future
    settle(future, None if isinstance(command, _Close) else error)


class _Mailbox:
    """Commands from the event loop to the consumer thread; once the thread has
    exited, nothing more is accepted."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Command] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._exited = False

    def put(self, command: _Command) -> bool:
        """Queue ``command``; False when the thread has exited."""
        with self._lock:
            if not self._exited:
                self._queue.put(command)
                return True
        return False

    def get(self, timeout: float) -> _Command | None:
        """The next command, waiting up to ``timeout`` (0: do not wait)."""
        try:
            return self._queue.get(block=timeout > 0, timeout=timeout or None)
        except queue.Empty:
            return None

    def close(self) -> list[_Command]:
        """Accept nothing more; the commands still queued."""
        with self._lock:
            self._exited = True
        left: list[_Command] = []
        while (command := self.get(0)) is not None:
            left.append(command)
        return left


@dataclass(slots=True)
class _Held:
    """Messages polled while nobody asked for them, and the partitions' pause state."""

    messages: deque[Message] = field(default_factory=deque)
    paused: bool = False
    unsure: bool = False
    """Partitions came with a pause state of their own (see ``_on_assign``)."""
    keepalive_at: float = 0.0
    """When the thread polls next while nobody asks for records."""


class KafkaSubscription:
    """One consumer of ``group`` on ``topic`` (see the module doc)."""

    def __init__(
        self, topic: str, group: str, config: dict[str, Any], options: KafkaOptions
    ) -> None:
        self.topic = topic
        self.group = group
        self._options = options
        self._mailbox = _Mailbox()
        self._closed = False
        # loop side: records fetched for a call that was cancelled, oldest first
        self._spare: deque[Record] = deque()
        # consumer thread side
        self._commits = Commits(topic, timeout_s=options.consumer.commit_timeout_s)
        self._fetches: deque[_Fetch] = deque()
        self._held = _Held()
        self._close: _Close | None = None
        self._failure: BusError | None = None
        self._assignment: frozenset[int] = frozenset()
        config = {"statistics.interval.ms": STATS_INTERVAL_MS, **config}
        self._membership = Membership(config, options.consumer.rejoin_s)
        self._consumer = self._connect()
        self._thread = threading.Thread(
            target=self._run, name=f"kafka-consumer-{topic}", daemon=True
        )
        self._thread.start()

    @property
    def assignment(self) -> frozenset[int]:
        """The partitions this consumer owns now."""
        return self._assignment

    def owns(self, partition: int) -> bool:
        return partition in self._assignment

    def stuck(self) -> str | None:
        """Why the consumer thread counts as stuck (liveness), or None: it has not
        come round its loop for ``stall_s``."""
        stalled = self._membership.stalled_for()
        if stalled < self._options.consumer.stall_s or not self._thread.is_alive():
            return None
        where = f"the consumer of {self.topic} (group {self.group})"
        return f"{where} has been stuck for {stalled:.0f} s"

    def stall_report(self) -> str | None:
        """Where the consumer thread is stuck, once, when it has not come round its
        loop for ``stall_s`` (None otherwise)."""
        membership = self._membership
        if membership.stall_reported or membership.stalled_for() < self._options.consumer.stall_s:
            return None
        if not self._thread.is_alive():
            return None
        membership.stall_reported = True
        return (
            f"the consumer thread of {self.topic} (group {self.group}) has been stuck for "
            f"{membership.stalled_for():.0f} s at:\n{stack_of(self._thread)}"
        )

    async def next(self) -> Record:
        return (await self.next_batch(1))[0]

    async def next_batch(self, max_records: int) -> list[Record]:
        """Wait for a record; return it with those already fetched behind it."""
        if max_records < 1:
            raise ValueError("max_records must be at least 1")
        self._check_open()
        if self._spare:
            return [self._spare.popleft() for _ in range(min(max_records, len(self._spare)))]
        future: asyncio.Future[list[Record]] = asyncio.get_running_loop().create_future()
        self._submit(_Fetch(future, max_records))
        try:
            return await future
        except asyncio.CancelledError:
            # cancelled after the records were handed over but before this call
            # woke: they go back, first in line, for the next call
            if future.done() and not future.cancelled():
                self._spare.extendleft(reversed(future.result()))
            raise

    async def commit(self, *records: Record) -> None:
        """Mark ``records`` done; return once positions covering them are committed
        (at once for those behind a record of their partition still in flight)."""
        self._check_open()
        for record in records:
            if record.topic != self.topic:
                raise BusError(
                    f"record of {record.topic} committed on a subscription to {self.topic}"
                )
        if not records:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._submit(_Finish(future, records))
        await future

    async def close(self) -> None:
        """Commit what is done, leave the group."""
        if self._closed:
            return
        self._closed = True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._submit(_Close(future))
        await future

    # ---------------------------------------------------------- loop side

    def _check_open(self) -> None:
        if self._closed:
            raise BusError(f"subscription to {self.topic} is closed")

    def _submit(self, command: _Command) -> None:
        if not self._mailbox.put(command):
            _answer(command, self._failure or BusError(f"{self.topic}: consumer stopped"))

    def _hand_over(self, fetch: _Fetch, records: list[Record]) -> None:
        """On the loop: records keep their order even when a call was cancelled."""
        self._spare.extend(records)
        if not fetch.future.done():
            count = min(fetch.max_records, len(self._spare))
            fetch.future.set_result([self._spare.popleft() for _ in range(count)])

    # ---------------------------------------------------------- consumer thread

    def _connect(self) -> Consumer:
        """A consumer of the group whose callbacks lapse once it is replaced."""
        bind = self._membership.bind
        self._starved_since: float | None = None
        config = {
            **self._membership.config,
            "error_cb": bind(self._on_error),
            "on_commit": bind(self._on_commit),
            "stats_cb": bind(LagGauge(self.group)),
        }
        try:
            consumer = Consumer(config)
            consumer.subscribe(
                [self.topic],
                on_assign=bind(self._on_assign),
                on_revoke=bind(self._on_revoke),
                on_lost=bind(self._on_lost),
            )
        except KafkaException as exc:
            raise BusError(f"cannot subscribe to {self.topic} (group {self.group}): {exc}") from exc
        return consumer

    def _renew(self, reason: str, why: str) -> None:
        """Replace a consumer that has not rejoined its group (module doc of
        :mod:`voxwire.bus.kafka_membership`) or that gets nothing while records
        wait (:meth:`_starved`); waiting fetches stay."""
        log.warning("%s (group %s): %s; a new consumer joins", self.topic, self.group, why)
        CONSUMER_RENEWALS.labels(topic=self.topic, reason=reason).inc()
        old = self._consumer
        self._membership.renewed()
        if self._assignment:
            self._forget(set(self._assignment), "left behind")
        self._held = _Held(keepalive_at=self._held.keepalive_at)
        self._consumer = self._connect()
        close_in_background(old, self.topic)

    def _run(self) -> None:
        failure: BaseException | None = None
        try:
            while self._close is None:
                self._membership.beat = time.monotonic()
                if self._membership.overdue():
                    lost_s = self._membership.wait_s()
                    self._renew("rejoin", f"no partitions back {lost_s:.0f} s after losing them")
                self._take_commands()
                self._commits.expire(self._assignment)
                self._flush()
                if self._failure is not None:
                    raise self._failure
                if self._close is not None:
                    break
                if self._held.unsure:
                    self._set_paused(self._held.paused)
                fetch = self._pending_fetch()
                if fetch is None:
                    self._starved_since = None  # nobody waits: nothing is late
                if fetch is not None:
                    self._serve(fetch)
                    if waiting := self._starved():
                        idle_s = self._options.consumer.idle_s
                        self._renew("idle", f"{waiting} records wait, none came in {idle_s:.0f} s")
                elif self._commits.awaited or time.monotonic() >= self._held.keepalive_at:
                    self._keepalive()  # also serves on_commit
        except BaseException as exc:  # reported to every waiter below
            log.exception("Kafka consumer of %s (group %s) failed", self.topic, self.group)
            failure = exc
        finally:
            self._shutdown(failure)

    def _take_commands(self) -> None:
        timeout = 0.0
        if not self._fetches:
            timeout = max(0.0, self._commits.wake_at(self._held.keepalive_at) - time.monotonic())
        command = self._mailbox.get(timeout)
        while command is not None:
            if isinstance(command, _Fetch):
                self._fetches.append(command)
            elif isinstance(command, _Finish):
                self._commits.finish(command.records, command.future)
            else:
                self._close = command
            command = self._mailbox.get(0)

    def _flush(self, *, force: bool = False) -> None:
        """Commit the positions that advanced, in one asynchronous request."""
        due = self._commits.take_due(force=force)
        if due is None:
            return
        offsets, commit = due
        try:
            self._consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            self._commits.failed(commit, kafka_error(exc) or exc, self._assignment)
            return
        self._commits.sent(commit)

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition] | None) -> None:
        """librdkafka's report on a commit (called inside poll, on this thread)."""
        self._commits.report(error, partitions, self._assignment)

    def _pending_fetch(self) -> _Fetch | None:
        while self._fetches and self._fetches[0].future.cancelled():
            self._fetches.popleft()
        return self._fetches[0] if self._fetches else None

    def _serve(self, fetch: _Fetch) -> None:
        self._held.keepalive_at = time.monotonic() + self._options.consumer.keepalive_s
        try:
            records = self._fetch(fetch.max_records)
        except BusError as exc:
            self._fetches.popleft()
            settle(fetch.future, exc)
            return
        if not records:
            if self._starved_since is None:
                self._starved_since = time.monotonic()
            return
        self._starved_since = None
        self._fetches.popleft()
        try:
            fetch.future.get_loop().call_soon_threadsafe(self._hand_over, fetch, records)
        except RuntimeError:
            log.warning("event loop closed; %d records not handed over", len(records))

    def _starved(self) -> int:
        """The records waiting on the partitions this consumer owns, when a fetch
        has waited ``idle_s`` for records and got none (0 otherwise). The broker
        is asked (at most once per ``idle_s``): a fetcher that stopped updates
        neither its positions' lag in the statistics nor anything else."""
        since, idle_s = self._starved_since, self._options.consumer.idle_s
        if since is None or not self._assignment or time.monotonic() - since < idle_s:
            return 0
        self._starved_since = time.monotonic()
        waiting = 0
        try:
            for partition in self._assignment:
                part = TopicPartition(self.topic, partition)
                low, high = self._consumer.get_watermark_offsets(part, timeout=2.0, cached=False)
                (at,) = self._consumer.position([part])
                waiting += max(0, high - (at.offset if at.offset >= 0 else low))
        except KafkaException as exc:
            log.info("%s: cannot tell whether records wait (%s)", self.topic, exc)
            return 0
        return waiting

    def _fetch(self, want: int) -> list[Record]:
        held = self._held.messages
        messages = [held.popleft() for _ in range(min(want, len(held)))]
        if not held and self._held.paused:
            self._set_paused(False)
        if not messages:
            first = self._consumer.poll(self._options.consumer.poll_s)
            if first is None:
                return []
            messages = [first]
        if len(messages) < want and not held:
            messages.extend(self._consumer.consume(want - len(messages), timeout=0))
        return self._to_records(messages)

    def _to_records(self, messages: list[Message]) -> list[Record]:
        records: list[Record] = []
        for i, message in enumerate(messages):
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                continue
            if error is not None:
                # deliver what came before; the error (and what follows) next time
                rest = messages[i:] if records else messages[i + 1 :]
                self._held.messages.extendleft(reversed(rest))
                if records:
                    break
                raise self._consume_error(error)
            record = Record(
                topic=message.topic() or self.topic,
                key=(message.key() or b"").decode(errors="replace"),
                value=message.value() or b"",
                offset=message.offset() or 0,
                partition=message.partition() or 0,
                timestamp=_seconds(message.timestamp()),
            )
            self._commits.started(record)
            records.append(record)
        return records

    def _consume_error(self, error: KafkaError) -> BusError:
        hint = None
        if error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            hint = _TOPICS_HINT
        return BusError(f"consuming {self.topic} (group {self.group}): {error.str()}", hint=hint)

    def _keepalive(self) -> None:
        """Poll while nobody asks, so the group sees us alive; hold what comes.

        While commit reports are awaited, this polls every few milliseconds:
        what comes then is held without pausing (pausing drops librdkafka's
        prefetch, and the next fetch is usually moments away) up to a bound.
        """
        idle = time.monotonic() >= self._held.keepalive_at
        if idle:
            self._held.keepalive_at = time.monotonic() + self._options.consumer.keepalive_s
        message = self._consumer.poll(0)
        if message is not None:
            self._held.messages.append(message)
            if idle or len(self._held.messages) >= self._options.consumer.prefetch_messages:
                self._set_paused(True)

    def _set_paused(self, paused: bool) -> None:
        partitions = self._consumer.assignment()
        if partitions:
            if paused:
                self._consumer.pause(partitions)
            else:
                self._consumer.resume(partitions)
        self._held.paused = paused
        self._held.unsure = False

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        ids = {tp.partition for tp in partitions}
        self._assignment = self._assignment | ids
        self._membership.assigned()
        # A partition that was paused here, taken away and given back can come
        # back paused (librdkafka keeps the flag), and nothing would resume it:
        # once it is assigned, every partition gets this consumer's pause state.
        self._held.unsure = True
        log.info("%s (group %s): assigned partitions %s", self.topic, self.group, sorted(ids))

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget({tp.partition for tp in partitions}, "revoked")

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._membership.lost()
        self._forget({tp.partition for tp in partitions}, "lost")

    def _forget(self, ids: set[int], how: str) -> None:
        in_flight = self._commits.forget(ids)
        self._held.messages = deque(m for m in self._held.messages if m.partition() not in ids)
        self._assignment = self._assignment - ids
        log.info(
            "%s (group %s): partitions %s %s (%d records in flight will be delivered again)",
            self.topic,
            self.group,
            sorted(ids),
            how,
            in_flight,
        )

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self._failure = BusError(f"Kafka consumer of {self.topic} failed: {error.str()}")
        elif error.code() == KafkaError._ALL_BROKERS_DOWN:
            log.warning("Kafka consumer of %s: %s", self.topic, error.str())
        else:
            log.debug("Kafka consumer of %s: %s", self.topic, error.str())

    def _shutdown(self, failure: BaseException | None) -> None:
        if failure is None:
            self._flush(force=True)
            deadline = time.monotonic() + self._options.close_timeout_s
            while self._commits.awaited and time.monotonic() < deadline:
                self._consumer.poll(COMMIT_POLL_S)  # serves on_commit; records are dropped
        try:
            self._consumer.close()
            log.info("%s (group %s): left the group", self.topic, self.group)
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer of %s: %s", self.topic, exc)
        error = BusError(f"subscription to {self.topic} is closed")
        if failure is not None:
            error = (
                failure
                if isinstance(failure, BusError)
                else BusError(f"Kafka consumer of {self.topic} failed: {failure!r}")
            )
            self._failure = error
        pending: list[_Command] = [*self._fetches, *self._mailbox.close()]
        self._commits.fail_all(error)
        for command in pending:
            _answer(command, error)
        if self._close is not None:
            settle(self._close.future, None)
