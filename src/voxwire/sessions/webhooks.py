"""Webhooks: an upload's ``callback`` URL gets the session's transcript once it is
stored (the session completed or failed), signed with the uploading key's
webhook secret (:mod:`voxwire_client.webhooks`).

Every route that uploads (the native upload, OpenAI's and Deepgram's) does the
same thing: it hands the URL to :class:`~voxwire.sessions.uploads.UploadService`
in :attr:`Upload.callback <voxwire.sessions.uploads.Upload.callback>`, which
calls :meth:`Webhooks.check` before the session opens (a 400 for a URL that is
malformed or whose host is not allowed: :mod:`voxwire.sessions.webhook_addresses`)
and :meth:`Webhooks.register` once the audio is stored. A route that must check
the URL before it reads the audio calls :meth:`Webhooks.check` itself first.

A registered delivery lives in the store (:mod:`voxwire.store.webhooks`) until
it is acknowledged or expires (``webhook_ttl_h`` after the upload); the
gateways' delivery loop (:mod:`voxwire.gateway.webhook_sender`) sends it once the
session is finished, and again after each failure, :func:`retry_delay` later.
What is sent is built at each attempt (:func:`event_of`): a deleted session's
deliveries are dropped with it (:mod:`voxwire.sessions.deletion`).
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from voxwire.access.keys import KeyGrant
from voxwire.core.config import Settings
from voxwire.core.errors import InvalidRequestError
from voxwire.sessions.views import transcript_of
from voxwire.sessions.webhook_addresses import AllowList, Target, check_callback
from voxwire.store import Store
from voxwire.store.webhooks import NewDelivery
from voxwire_client.messages import SessionStatus
from voxwire_client.webhooks import WebhookEvent


def retry_delay(attempts: int, base_s: float, cap_s: float, jitter: float) -> float:
    """Seconds to wait after the ``attempts``-th failed attempt: ``base_s`` doubled
    each time, at most ``cap_s``, times a factor from 0.5 to 1 (``jitter``, from 0
    to 1: a random draw), so that deliveries failed together do not retry together."""
    if attempts < 1:
        raise ValueError(f"attempts counts from 1, not {attempts}")
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter is a fraction from 0 to 1, not {jitter}")
    exponent = min(attempts - 1, 62)
    return min(cap_s, base_s * 2.0**exponent) * (0.5 + jitter / 2)


class Webhooks:
    """Checks callback URLs and registers their deliveries."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.allow = AllowList.of(settings.security.webhook_allow)
        self._ttl = timedelta(hours=settings.limits.webhook_ttl_h)
        self._store = store

    async def check(self, url: str, key: KeyGrant | None) -> Target:
        """``url`` if a callback may go there (resolved now); InvalidRequestError
        (a 400) saying why not. ``key``: the caller's (a callback is signed with
        its secret, so a request without one cannot name a callback)."""
        if key is None:
            raise InvalidRequestError(
                "a callback needs an API key: its webhook secret signs the deliveries",
                hint="upload with an API key, or leave the callback out",
            )
        return await check_callback(url, self.allow)

    async def register(self, sid: str, key: KeyGrant, target: Target, now: datetime) -> str:
        """Record the delivery of session ``sid``'s transcript to ``target``: its id."""
        delivery = NewDelivery(
            id="wh_" + secrets.token_hex(8),
            sid=sid,
            key_id=key.key_id,
            url=target.url,
            created_at=now,
            expires_at=now + self._ttl,
        )
        await self._store.add_delivery(delivery)
        return delivery.id


async def event_of(store: Store, sid: str, delivery_id: str) -> WebhookEvent | None:
    """What a delivery sends for session ``sid`` now (None: the session is gone)."""
    session = await store.get_session(sid)
    if session is None:
        return None
    transcript = await transcript_of(store, session)
    failed = session.status is SessionStatus.FAILED
    return WebhookEvent(
        **transcript.model_dump(),
        event="session.failed" if failed else "session.completed",
        delivery=delivery_id,
        error_code=session.error_code,
        error_message=session.error_message,
    )
