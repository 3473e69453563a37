"""The SDK's webhook signature: what a receiver runs on each delivery."""

from __future__ import annotations

import pytest

from voxwire_client.messages import SessionStatus
from voxwire_client.webhooks import WebhookEvent, WebhookSignatureError, sign, signature, verify

SECRET = "whsec_test-secret"
NOW = 1_760_000_000


def event_body() -> bytes:
    event = WebhookEvent(
        sid="s_0123456789ab",
        status=SessionStatus.COMPLETED,
        text="ask not what your country can do for you",
        segments=(),
        event="session.completed",
        delivery="wh_0011223344556677",
    )
    return event.model_dump_json().encode()


def test_a_signed_body_verifies_and_parses() -> None:
    body = event_body()
    header = sign(SECRET, body, timestamp=NOW)
    assert header == f"t={NOW},v1={signature(SECRET, NOW, body)}"
    event = verify(SECRET, header, body, now=NOW + 10)
    assert event.sid == "s_0123456789ab" and event.event == "session.completed"


def test_a_tampered_body_fails() -> None:
    body = event_body()
    header = sign(SECRET, body, timestamp=NOW)
    tampered = body.replace(b"country", b"company")
    with pytest.raises(WebhookSignatureError, match="does not match"):
        verify(SECRET, header, tampered, now=NOW)


def test_a_wrong_secret_fails() -> None:
    body = event_body()
    header = sign("whsec_another", body, timestamp=NOW)
    with pytest.raises(WebhookSignatureError, match="does not match"):
        verify(SECRET, header, body, now=NOW)


def test_a_changed_timestamp_fails() -> None:
    body = event_body()
    digest = signature(SECRET, NOW, body)
    with pytest.raises(WebhookSignatureError, match="does not match"):
        verify(SECRET, f"t={NOW + 1},v1={digest}", body, now=NOW)


def test_an_old_signature_is_a_replay() -> None:
    body = event_body()
    header = sign(SECRET, body, timestamp=NOW)
    with pytest.raises(WebhookSignatureError, match="from now"):
        verify(SECRET, header, body, now=NOW + 301)
    assert verify(SECRET, header, body, now=NOW + 3600, tolerance_s=7200).sid


@pytest.mark.parametrize("header", [None, "", "v1=abc", "t=1760000000", "t=abc,v1=00", "garbage"])
def test_a_malformed_header_fails(header: str | None) -> None:
    with pytest.raises(WebhookSignatureError):
        verify(SECRET, header, event_body(), now=NOW)


def test_one_matching_signature_of_several_passes() -> None:
    body = event_body()
    good = signature(SECRET, NOW, body)
    header = f"t={NOW},v1={'0' * 64},v1={good}"
    assert verify(SECRET, header, body, now=NOW).delivery == "wh_0011223344556677"


def test_a_signed_body_that_is_not_an_event_fails() -> None:
    body = b'{"hello": "world"}'
    with pytest.raises(WebhookSignatureError, match="not a webhook event"):
        verify(SECRET, sign(SECRET, body, timestamp=NOW), body, now=NOW)
