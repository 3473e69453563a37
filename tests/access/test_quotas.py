"""The quota decision: given limits and use, allow or a typed refusal naming the
quota, its limit, the use and when it resets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from voxwire.access.quotas import (
    Ask,
    Limits,
    QuotaExceededError,
    Refusal,
    Use,
    decide,
    parse_name,
    resets_at,
)

NOW = datetime(2025, 12, 31, 22, 30, tzinfo=UTC)


def test_no_limits_allow_everything() -> None:
    busy = Use(live_streams=1000, uploads_in_flight=1000, audio_seconds_today=1e9)
    for ask in (Ask("live"), Ask("upload", 10**12), Ask("retranscription")):
        assert decide(Limits(), busy, ask, NOW) is None


def test_live_streams_counts_only_live_streams() -> None:
    limits = Limits({"live_streams": 2})
    assert decide(limits, Use(live_streams=1), Ask("live"), NOW) is None
    refusal = decide(limits, Use(live_streams=2), Ask("live"), NOW)
    assert refusal == Refusal("live_streams", "tenant", 2, 2, None)
    assert decide(limits, Use(live_streams=2), Ask("upload", 10), NOW) is None
    assert "live_streams quota of 2 streams is used up" in refusal.message
    assert "wait for a session to finish" in refusal.hint


def test_uploads_in_flight_holds_uploads_and_retranscriptions() -> None:
    limits = Limits({"uploads_in_flight": 3})
    use = Use(uploads_in_flight=3)
    assert decide(limits, use, Ask("upload", 10), NOW) is not None
    assert decide(limits, use, Ask("retranscription"), NOW) is not None
    assert decide(limits, use, Ask("live"), NOW) is None


def test_audio_quotas_reset_at_the_next_utc_day_and_month() -> None:
    day = decide(
        Limits({"audio_seconds_per_day": 60}), Use(audio_seconds_today=61.5), Ask("live"), NOW
    )
    assert day is not None
    assert day.resets_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert day.used == 61.5
    month = decide(
        Limits({"audio_seconds_per_month": 3600}),
        Use(audio_seconds_month=3600),
        Ask("upload", 1),
        NOW,
    )
    assert month is not None and month.quota == "audio_seconds_per_month"
    assert month.resets_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert resets_at("audio_seconds_per_month", datetime(2024, 2, 10, tzinfo=UTC)) == datetime(
        2024, 3, 1, tzinfo=UTC
    )
    assert "resets at 2026-01-01 00:00 UTC" in day.hint


def test_upload_size_before_decoding_and_length_after() -> None:
    limits = Limits({"upload_bytes": 1000, "upload_seconds": 30})
    refusal = decide(limits, Use(), Ask("upload", 1001), NOW)
    assert refusal == Refusal("upload_bytes", "tenant", 1000, 1001, None)
    assert "this upload has 1001 bytes" in refusal.message
    assert decide(limits, Use(), Ask("upload", 1000), NOW) is None
    assert decide(limits, Use(), Ask("decoded", upload_seconds=30.0), NOW) is None
    longer = decide(limits, Use(), Ask("decoded", upload_seconds=30.04), NOW)
    assert longer is not None and longer.quota == "upload_seconds"


def test_a_decoded_upload_is_not_counted_again() -> None:
    """The upload itself is in flight by then: only its length is checked."""
    limits = Limits({"uploads_in_flight": 1, "audio_seconds_per_day": 1})
    busy = Use(uploads_in_flight=1, audio_seconds_today=5)
    assert decide(limits, busy, Ask("decoded", upload_seconds=3.0), NOW) is None


def test_a_keys_quota_applies_on_top_of_its_tenants() -> None:
    tenant = Limits({"live_streams": 10})
    key = Limits({"live_streams": 1})
    refusal = decide(
        tenant, Use(live_streams=5), Ask("live"), NOW, key_limits=key, key_use=Use(live_streams=1)
    )
    assert refusal is not None and refusal.scope == "key"
    assert "the API key's live_streams quota" in refusal.message
    first = decide(
        Limits({"live_streams": 5}),
        Use(live_streams=5),
        Ask("live"),
        NOW,
        key_limits=key,
        key_use=Use(),
    )
    assert first is not None and first.scope == "tenant"


def test_zero_refuses_everything() -> None:
    assert decide(Limits({"live_streams": 0}), Use(), Ask("live"), NOW) is not None


def test_the_error_says_when_to_retry() -> None:
    refusal = Refusal("audio_seconds_per_day", "tenant", 60, 60, datetime(2026, 1, 1, tzinfo=UTC))
    error = QuotaExceededError(refusal)
    assert error.code == "quota_exceeded"
    assert error.retry_after_s(NOW) == 5400
    assert QuotaExceededError(Refusal("live_streams", "tenant", 1, 1)).retry_after_s(NOW) is None


def test_names_as_typed() -> None:
    assert parse_name("live-streams") == "live_streams"
    with pytest.raises(ValueError, match="one of live_streams"):
        parse_name("streams")
