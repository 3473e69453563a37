"""Webhooks: what the platform POSTs to an upload's ``callback`` URL, and how a
receiver checks that the platform sent it.

Once the session's transcript is stored (or the session failed), the platform
POSTs a :class:`WebhookEvent` as JSON, with these headers:

``Voxwire-Signature``  ``t=<unix seconds>,v1=<hex>``: HMAC-SHA256, keyed with the
                      webhook secret of the API key that uploaded, over
                      ``"<t>." + body`` (the body's bytes as sent)
``Voxwire-Delivery``   the delivery's id: the same on every retry, so a receiver
                      that sees it twice can drop the second
``Voxwire-Session``    the session id

A receiver answers any 2xx once it has the event; anything else (or no answer) is
retried with backoff until the delivery expires. :func:`verify` checks the
signature and its age in constant time, and returns the parsed event::

    from voxwire_client.webhooks import WebhookSignatureError, verify

    try:
        event = verify(secret, request.headers["Voxwire-Signature"], raw_body)
    except WebhookSignatureError:
        return 400

The secret is shown when a key is created and by ``voxwire keys webhook-secret
KEY_ID`` (``--rotate`` makes a new one). :func:`sign` is what the platform does.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Literal

from pydantic import Field, ValidationError

from voxwire_client.api import TranscriptResponse
from voxwire_client.errors import ClientError

SIGNATURE_HEADER = "Voxwire-Signature"
DELIVERY_HEADER = "Voxwire-Delivery"
SESSION_HEADER = "Voxwire-Session"
TOLERANCE_S = 300.0
"""How old (or how far ahead) a signature's timestamp may be by default."""


class WebhookSignatureError(ClientError):
    """The signature header is missing, malformed, too old, or does not match the body."""

    code = "webhook_signature"


class WebhookEvent(TranscriptResponse):
    """The body of a webhook: the session's transcript as ``GET
    /v1/sessions/{sid}/transcript`` answers it, and why it ended."""

    v: Literal[1] = 1
    event: Literal["session.completed", "session.failed"]
    delivery: str = Field(description="the delivery's id (also the Voxwire-Delivery header)")
    error_code: str | None = Field(default=None, description="why it failed (session.failed)")
    error_message: str | None = None


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>." + body`` keyed with ``secret``."""
    signed = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The ``Voxwire-Signature`` header value for ``body`` (``timestamp``: now)."""
    at = int(time.time()) if timestamp is None else timestamp
    return f"t={at},v1={signature(secret, at, body)}"


def verify(
    secret: str,
    header: str | None,
    body: bytes,
    *,
    tolerance_s: float = TOLERANCE_S,
    now: float | None = None,
) -> WebhookEvent:
    """The event in ``body`` if ``header`` (the ``Voxwire-Signature`` value) signs it
    with ``secret`` within ``tolerance_s`` of ``now``; else WebhookSignatureError.
    Several ``v1=`` values (sent while a secret is rotated) pass if one matches."""
    if not secret:
        raise WebhookSignatureError("no webhook secret", hint="voxwire keys webhook-secret KEY_ID")
    timestamp, candidates = _parse(header or "")
    at = time.time() if now is None else now
    if abs(at - timestamp) > tolerance_s:
        raise WebhookSignatureError(
            f"signature timestamp {timestamp} is {abs(at - timestamp):.0f}s from now",
            hint=f"a replay, or clocks apart by more than {tolerance_s:g}s",
        )
    expected = signature(secret, timestamp, body)
    if not any(hmac.compare_digest(expected, c) for c in candidates):
        raise WebhookSignatureError(
            "signature does not match the body",
            hint="verify the raw body as received, with the secret of the key that uploaded",
        )
    try:
        return WebhookEvent.model_validate_json(body)
    except ValidationError as exc:
        raise WebhookSignatureError(f"signed body is not a webhook event: {exc}") from None


def _parse(header: str) -> tuple[int, list[str]]:
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t" and value.isdigit():
            timestamp = int(value)
        elif name == "v1" and value:
            candidates.append(value.lower())
    if timestamp is None or not candidates:
        raise WebhookSignatureError(
            f"malformed {SIGNATURE_HEADER} header {header[:80]!r}",
            hint="expected t=<unix>,v1=<hex>",
        )
    return timestamp, candidates
