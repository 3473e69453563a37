"""The committed contract files match the models."""

from pathlib import Path

from voxwire.cli import asyncapi as contract

CONTRACT_DIR = Path(__file__).resolve().parents[2] / "client-sdk" / "contract"


def test_committed_contract_matches_the_models() -> None:
    rendered = contract.render()
    for rel, text in rendered.items():
        path = CONTRACT_DIR / rel
        assert path.exists(), f"{rel} missing: run `make contract`"
        assert path.read_text() == text, f"{rel} drifted from the models: run `make contract`"
    committed = {str(p.relative_to(CONTRACT_DIR)) for p in CONTRACT_DIR.rglob("*.json")}
    assert committed == set(rendered), "stale contract files: run `make contract`"


def test_asyncapi_names_every_session_topic() -> None:
    doc = contract.asyncapi()
    addresses = {c["address"] for c in doc["channels"].values()}
    assert addresses == {
        "transcription/{sid}/result",
        "transcription/{sid}/progress",
        "transcription/{sid}/match",
        "audio/{sid}/chunk/{n}",
        "audio/{sid}/control",
        "query/{keyId}/{qid}/request",
        "query/{keyId}/{qid}/result",
        "query/{keyId}/{upload}/part/{n}",
    }
