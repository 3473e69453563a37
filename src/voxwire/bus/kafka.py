"""The Kafka bus of distributed mode, on confluent-kafka (librdkafka).

Producing: one idempotent producer (``acks=all``) per bus. :meth:`KafkaBus.produce`
returns only when the delivery report says the broker accepted the record; a
thread polls the producer for those reports and settles the waiting futures.
The key is the session id, so a session stays on one partition, in order.
When librdkafka's local queue is full, ``produce`` waits and retries: a slow
broker slows the producers down instead of dropping records.

Consuming: :meth:`KafkaBus.subscribe` returns a
:class:`~voxwire.bus.kafka_consumer.KafkaSubscription`, one consumer of its
group, owned by one thread; its commits are kept by
:mod:`voxwire.bus.kafka_commits`. Client settings are
:class:`~voxwire.bus.kafka_options.KafkaOptions`; topics are created by
:mod:`voxwire.bus.topics`.

Errors from librdkafka become :class:`~voxwire.core.errors.BusError` where they
enter, with the topic and key.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
import weakref

from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from voxwire.bus.kafka_commits import settle
from voxwire.bus.kafka_consumer import KafkaSubscription
from voxwire.bus.kafka_options import KafkaOptions, consumer_config, kafka_error, producer_config
from voxwire.core.errors import BusError

log = logging.getLogger(__name__)


_GONE = ConsumerGroupState.DEAD
"""The state a coordinator gives a group that does not exist (never did, or its
positions expired). Every other state is a group that exists: rebalancing
(PREPARING/COMPLETING_REBALANCING, members listed or not yet), EMPTY, and
UNKNOWN, a state this client cannot name (a KIP-848 group's ASSIGNING or
RECONCILING)."""


class KafkaBus:
    """The :class:`~voxwire.bus.base.Bus` on Kafka."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str = "voxwire",
        options: KafkaOptions | None = None,
    ) -> None:
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._options = options or KafkaOptions()
        self._failure: BusError | None = None
        config = producer_config(bootstrap, client_id, self._options)
        config["error_cb"] = self._on_error
        try:
            self._producer = Producer(config)
        except KafkaException as exc:
            raise BusError(f"cannot create a Kafka producer for {bootstrap}: {exc}") from exc
        self._stop = threading.Event()
        self._poller = threading.Thread(
            target=self._poll_producer, name="kafka-producer", daemon=True
        )
        self._poller.start()
        self._subscriptions: weakref.WeakSet[KafkaSubscription] = weakref.WeakSet()
        self._admin: AdminClient | None = None
        self._closed = False

    @property
    def options(self) -> KafkaOptions:
        return self._options

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        """Return once the broker accepted the record; raise BusError if not."""
        if self._closed or self._failure is not None:
            reason = self._failure or "bus is closed"
            raise BusError(f"cannot produce to {topic} (key {key}): {reason}", sid=key)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            if error is None:
                settle(done, None)
                return
            reason = f"Kafka did not accept a record for {topic} (key {key}): {error.str()}"
            settle(done, BusError(reason, sid=key))

        delay = 0.001
        while True:
            try:
                self._producer.produce(topic, value, key.encode(), on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: wait for deliveries
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.1)
            except KafkaException as exc:
                raise BusError(
                    f"cannot produce to {topic} (key {key}): {kafka_error(exc) or exc}", sid=key
                ) from exc
        await done

    async def ping(self, timeout_s: float = 1.5) -> str:
        """A metadata round trip to the cluster (readiness): how many brokers it has."""

        def brokers() -> int:
            try:
                return len(self._producer.list_topics(timeout=timeout_s).brokers)
            except KafkaException as exc:
                raise BusError(
                    f"Kafka at {self._bootstrap} did not answer: {kafka_error(exc) or exc}"
                ) from exc

        if self._failure is not None:
            raise self._failure
        return f"{await asyncio.to_thread(brokers)} broker(s)"

    def subscribe(self, topic: str, group: str) -> KafkaSubscription:
        if self._closed:
            raise BusError(f"bus is closed; cannot subscribe to {topic}")
        config = consumer_config(self._bootstrap, self._client_id, group, self._options)
        subscription = KafkaSubscription(topic, group, config, self._options)
        self._subscriptions.add(subscription)
        return subscription

    async def has_group(self, group: str, timeout_s: float = 2.0) -> bool:
        """Whether ``group`` exists, as its coordinator sees it: in any state but
        dead (members or none, rebalancing, or a state this client cannot name).
        Only a group the coordinator reports dead or not found (never was, or its
        positions expired) is a no; a describe that fails or does not answer in
        time raises BusError (cannot say)."""

        def describe() -> bool:
            if self._admin is None:
                self._admin = AdminClient(
                    {"bootstrap.servers": self._bootstrap, "client.id": self._client_id}
                )
            future = self._admin.describe_consumer_groups([group], request_timeout=timeout_s)
            try:  # bounded here too: a coordinator that moves can hold the answer back
                found = future[group].result(timeout=timeout_s + 1)
            except concurrent.futures.TimeoutError as exc:
                raise BusError(
                    f"Kafka at {self._bootstrap} did not say within {timeout_s + 1:.0f} s "
                    f"whether group {group} exists"
                ) from exc
            except KafkaException as exc:
                error = kafka_error(exc)
                if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                    return False
                raise BusError(
                    f"cannot ask Kafka at {self._bootstrap} about group {group}: {error or exc}"
                ) from exc
            return bool(found.members) or found.state != _GONE

        return await asyncio.to_thread(describe)

    async def close(self) -> None:
        """Deliver what is queued (up to ``close_timeout_s``), close consumers."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.to_thread(self._stop_producer)
        finally:
            self._admin = None  # destroyed here, not on one of librdkafka's threads
            await asyncio.gather(*(s.close() for s in list(self._subscriptions)))

    def stuck(self) -> str | None:
        """Liveness: why a consumer thread of this bus is stuck, or None."""
        with contextlib.suppress(RuntimeError):  # subscribed to meanwhile: next time
            for subscription in list(self._subscriptions):
                if why := subscription.stuck():
                    return why
        return None

    def _poll_producer(self) -> None:
        """Serve delivery reports; now and then, report consumer threads that are stuck."""
        look_at = time.monotonic()
        while not self._stop.is_set():
            try:
                self._producer.poll(0.1)
            except Exception:  # a callback failed: keep serving the others
                log.exception("Kafka producer: delivery report handling failed")
            if time.monotonic() >= look_at:
                look_at = time.monotonic() + 5.0
                with contextlib.suppress(RuntimeError):  # subscribed to meanwhile
                    for subscription in list(self._subscriptions):
                        if report := subscription.stall_report():
                            log.error("%s", report)

    def _stop_producer(self) -> None:
        self._stop.set()
        self._poller.join()
        left = self._producer.flush(self._options.close_timeout_s)
        if left:
            log.warning("closing the Kafka bus: %d records were not delivered", left)
            self._producer.purge()
            self._producer.poll(0)  # their futures fail with a purge error
        # destroy the handle here and now, not in whichever thread the garbage
        # collector happens to run (librdkafka aborts if that is one of its own)
        self._producer.close()

    def _on_error(self, error: KafkaError) -> None:
        if error.fatal():
            log.error("Kafka producer failed: %s", error.str())
            self._failure = BusError(f"Kafka producer failed: {error.str()}")
        elif error.code() == KafkaError._ALL_BROKERS_DOWN:
            log.warning("Kafka producer: %s", error.str())
        else:
            log.debug("Kafka producer: %s", error.str())
