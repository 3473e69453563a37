"""A bus whose topic and group names carry a prefix, so that several voxwire
installations (or test runs) can share one Kafka cluster."""

from __future__ import annotations

from dataclasses import replace

from voxwire.bus.base import Bus, Record, Subscription
from voxwire.core.readiness import Pingable


class _NamespacedSubscription:
    def __init__(self, inner: Subscription, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix

    def _strip(self, record: Record) -> Record:
        return replace(record, topic=record.topic.removeprefix(self._prefix))

    async def next(self) -> Record:
        return self._strip(await self._inner.next())

    async def next_batch(self, max_records: int) -> list[Record]:
        return [self._strip(r) for r in await self._inner.next_batch(max_records)]

    async def commit(self, *records: Record) -> None:
        await self._inner.commit(*(replace(r, topic=self._prefix + r.topic) for r in records))

    def owns(self, partition: int) -> bool:
        return self._inner.owns(partition)

    async def close(self) -> None:
        await self._inner.close()


class NamespacedBus:
    def __init__(self, inner: Bus, prefix: str) -> None:
        self._inner = inner
        self.prefix = prefix

    async def produce(self, topic: str, key: str, value: bytes) -> None:
        await self._inner.produce(self.prefix + topic, key, value)

    def subscribe(self, topic: str, group: str) -> Subscription:
        inner = self._inner.subscribe(self.prefix + topic, self.prefix + group)
        return _NamespacedSubscription(inner, self.prefix)

    async def has_group(self, group: str) -> bool:
        return await self._inner.has_group(self.prefix + group)

    async def ping(self) -> str | None:
        return await self._inner.ping() if isinstance(self._inner, Pingable) else None

    def stuck(self) -> str | None:
        stuck = getattr(self._inner, "stuck", None)
        return None if stuck is None else stuck()

    async def close(self) -> None:
        await self._inner.close()
