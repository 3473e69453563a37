"""amqtt's broker with retained delivery that asks the authorizer, and a safe subscription table.

amqtt sends every client, on each connect, the retained messages matching
*anyone's* subscriptions, without asking the authorizer. :class:`RetainedBroker`
sends retained messages only to the client that subscribes, on SUBSCRIBE (as
MQTT specifies), and only where the gate allows ``receive``; messages queued
for an offline persistent session still arrive on reconnect.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from amqtt.broker import Broker
from amqtt.contexts import Action as AmqttAction
from amqtt.events import BrokerEvents

from voxwire.broker.gate import AccessGate

if TYPE_CHECKING:
    from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
    from amqtt.session import Session

log = logging.getLogger(__name__)

SUBACK_FAILURE = 0x80


class SubscriptionTable(dict[str, list[tuple["Session", int]]]):
    """amqtt's subscription table, iterated over snapshots.

    amqtt awaits inside its loops over subscriptions (authorization, queueing for
    offline sessions); a client subscribing meanwhile changed the dict under the
    loop ("dictionary changed size during iteration"), which silently dropped the
    message being broadcast for every remaining subscriber.
    """

    def __iter__(self) -> Iterator[str]:
        return iter(list(super().keys()))

    def items(self) -> list[tuple[str, list[tuple[Session, int]]]]:  # type: ignore[override]
        return [(topic, list(subs)) for topic, subs in super().items()]


class RetainedBroker(Broker):  # type: ignore[misc]  # amqtt is untyped
    """amqtt's broker, sending retained messages only where ``gate`` allows ``receive``."""

    def __init__(self, config: dict[str, Any], gate: AccessGate) -> None:
        super().__init__(config)
        self._subscriptions = SubscriptionTable()
        self._gate = gate

    async def _handle_subscription(
        self,
        client_session: Session,
        handler: BrokerProtocolHandler,
        subscribe_waiter: asyncio.Future[Any],
    ) -> None:
        subscriptions = subscribe_waiter.result()
        codes = [await self.add_subscription(sub, client_session) for sub in subscriptions.topics]
        await handler.mqtt_acknowledge_subscription(subscriptions.packet_id, codes)
        for (topic_filter, qos), code in zip(subscriptions.topics, codes, strict=True):
            if code == SUBACK_FAILURE:
                continue
            await self.plugins_manager.fire_event(
                BrokerEvents.CLIENT_SUBSCRIBED,
                client_id=client_session.client_id,
                topic=topic_filter,
                qos=qos,
            )
            await self._send_retained(client_session, handler, topic_filter, code)

    async def _send_retained(
        self, session: Session, handler: BrokerProtocolHandler, topic_filter: str, granted: int
    ) -> None:
        sends = []
        for topic, message in list(self.retained_messages.items()):
            if not self._matches(topic, topic_filter):
                continue
            if not await self._gate.allow(session, topic, AmqttAction.RECEIVE):
                continue
            qos = min(granted, message.qos if message.qos is not None else granted)
            sends.append(handler.mqtt_publish(topic, message.data, qos, retain=True))
        for result in await asyncio.gather(*sends, return_exceptions=True):
            if isinstance(result, BaseException):
                log.debug("retained delivery to %s failed: %r", session.client_id, result)

    async def _publish_retained_messages_for_subscription(
        self, subscription: tuple[str, int], session: Session
    ) -> None:
        """Do nothing: amqtt calls this on connect for every client's filters (see module doc).

        Retained messages are sent on SUBSCRIBE (``_send_retained``), as MQTT specifies;
        messages queued for an offline persistent session still arrive on reconnect.
        """
