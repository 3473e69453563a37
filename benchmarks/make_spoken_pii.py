"""Make evaluation/redaction/spoken.jsonl: personal data spoken by espeak-ng and
written down by the platform's engine, with its real recognition errors.

Each item is a sentence that says a card number, a social security number, a
phone number, a bank account number, an email address, a street address or an
IBAN in one of the ways people say them (digit by digit in groups, in pairs, as
written numbers, with "oh" for zero), or a sentence with ordinary numbers and
nothing personal. It is spoken by several espeak-ng voices at several speeds
and transcribed by faster-whisper with tiny.en (int8 on the CPU, English,
greedy), as a worker does. A row holds what was said, what the engine wrote (``text``), the entity,
the span of ``text`` that holds it, and ``secret``: the character ranges of
``text`` that must not survive redaction (its digits and identifying words;
"dot", "at" and street types may). Sentences with nothing personal have no
entity and no secret.

    .venv/bin/python benchmarks/make_spoken_pii.py [--out evaluation/redaction/spoken.jsonl]

Needs espeak-ng (``scripts/services.sh speech``) and the tiny.en model; takes a
few minutes on two cores. The output is committed: tests read it, they do not
run the engine.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.redaction.spoken import SPOKEN  # noqa: E402
from voxwire.audio.decoding import decode  # noqa: E402
from voxwire.workers.engine import EngineOptions  # noqa: E402
from voxwire.workers.engines import create_engine  # noqa: E402

VOICES = ("en-us", "en-gb", "en+m3", "en-gb-x-rp", "en-029", "en-gb-scotland")
SPEEDS = (140, 160, 175)
TAKES = 2  # each sentence in two voices/speeds

_DIGIT = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
_TEENS = [
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_NUMBERS = frozenset({"CREDIT_CARD", "US_SSN", "PHONE_NUMBER", "ACCOUNT_NUMBER"})
_NUMBER_WORDS = frozenset(
    [*_DIGIT, *_TEENS, *_TENS[2:], "oh", "hundred", "thousand", "million", "double", "triple"]
)
_NOT_SECRET = frozenset(
    [
        "dot",
        "at",
        "and",
        "is",
        "the",
        "my",
        "a",
        "number",
        "please",
        "thanks",
        "thank",
        "you",
        "street",
        "avenue",
        "road",
        "lane",
        "drive",
        "way",
        "court",
        "place",
        "com",
        "org",
        "net",
        "co",
        "uk",
    ]
)


@dataclass(frozen=True)
class Item:
    entity: str | None
    before: str  # what is said before the personal data
    said: str  # the personal data as spoken (empty: nothing personal)
    after: str  # what is said after it


def digits(groups: str, zero: str = "zero") -> str:
    """'4111 1111' said digit by digit, group by group: 'four one one one, one ...'."""
    return ", ".join(
        " ".join(zero if d == "0" else _DIGIT[int(d)] for d in group) for group in groups.split()
    )


def pair(n: int) -> str:
    if n < 10:
        return f"oh {_DIGIT[n]}"
    if n < 20:
        return _TEENS[n - 10]
    tens, ones = divmod(n, 10)
    return _TENS[tens] + (f" {_DIGIT[ones]}" if ones else "")


def pairs(groups: str) -> str:
    """'4111 1111' said two digits at a time: 'forty one eleven, eleven eleven'."""
    return ", ".join(
        " ".join(pair(int(g[i : i + 2])) if len(g[i:]) >= 2 else _DIGIT[int(g[i])]
                 for i in range(0, len(g), 2))
        for g in groups.split()
    )  # fmt: skip


def spelled(text: str) -> str:
    """An IBAN said character by character, group by group."""
    return ", ".join(
        " ".join(_DIGIT[int(c)] if c.isdigit() else c for c in group) for group in text.split()
    )


CARDS = ("4111 1111 1111 1111", "5500 0000 0000 0004", "4539 1488 0343 6467", "6011 0009 9013 9424")
CARD_CONTEXT = (
    ("my card number is", "thanks"),
    ("the credit card is", ""),
    ("please charge it to my card,", ""),
    ("", "is my card number"),
)
SSNS = ("536 22 1234", "078 05 1120", "219 09 9999")
SSN_CONTEXT = (("my social security number is", ""), ("the SSN is", "okay"), ("", "is my social"))
PHONES = ("212 555 0123", "415 867 5309", "020 7946 0958")
PHONE_CONTEXT = (("you can call me at", ""), ("my phone number is", "thanks"))
EMAILS = (
    "jane dot doe at example dot com",
    "peter smith at gmail dot com",
    "m dot garcia at acme dot org",
)
ADDRESSES = ("twelve oak lane", "one two three four main street", "forty two elm avenue")
ACCOUNTS = ("1234 5678 9012", "0098 7654 321", "3141 5926")
ACCOUNT_CONTEXT = (("my account number is", ""), ("pay into account", "today"))
IBANS = ("GB82 WEST 1234 5698 7654 32", "DE89 3704 0044 0532 0130 00")
ORDINARY = (
    "the meeting moved to room four twelve at three thirty",
    "we shipped twelve hundred boxes in two thousand nineteen",
    "turn to page three hundred and four of the report",
    "the flight leaves at seven forty five from gate nine",
    "about two thousand five hundred people came to the game",
    "the recipe needs four eggs and two cups of flour",
)


def items() -> list[Item]:
    found: list[Item] = []
    for n, card in enumerate(CARDS):
        for k, (before, after) in enumerate(CARD_CONTEXT):
            said = (digits(card), pairs(card), card, digits(card, "oh"))[(n + k) % 4]
            found.append(Item("CREDIT_CARD", before, said, after))
    for n, ssn in enumerate(SSNS):
        for k, (before, after) in enumerate(SSN_CONTEXT):
            said = (digits(ssn), pairs(ssn), digits(ssn, "oh"))[(n + k) % 3]
            found.append(Item("US_SSN", before, said, after))
    for n, phone in enumerate(PHONES):
        for k, (before, after) in enumerate(PHONE_CONTEXT):
            for form in range(2):
                said = (digits(phone, "oh"), digits(phone), pairs(phone))[(n + k + form) % 3]
                found.append(Item("PHONE_NUMBER", before, said, after))
    for n, account in enumerate(ACCOUNTS):
        for k, (before, after) in enumerate(ACCOUNT_CONTEXT):
            said = (digits(account), pairs(account), account)[(n + k) % 3]
            found.append(Item("ACCOUNT_NUMBER", before, said, after))
    for email in EMAILS:
        found.append(Item("EMAIL_ADDRESS", "my email is", email, ""))
        found.append(Item("EMAIL_ADDRESS", "write to", email, "please"))
    for address in ADDRESSES:
        found.append(Item("STREET_ADDRESS", "I live at", address, ""))
        found.append(Item("STREET_ADDRESS", "send it to", address, "please"))
    for iban in IBANS:
        found.append(Item("IBAN_CODE", "my IBAN is", spelled(iban), ""))
        found.append(Item("IBAN_CODE", "the account is", spelled(iban), "thanks"))
    found += [Item(None, sentence, "", "") for sentence in ORDINARY]
    return found


def _words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group().lower(), m.start(), m.end()) for m in re.finditer(r"[\w']+", text)]


def locate(item: Item, text: str) -> tuple[int, int] | None:
    """The span of ``text`` that holds what ``item.said``: between the last
    recognised word of what was said before it and the first of what was said after."""
    if not item.said:
        return None
    before, after = _words(item.before), _words(item.after)
    heard = _words(text)
    said = [w for w, _, _ in before] + ["\0"] + [w for w, _, _ in after]
    matcher = difflib.SequenceMatcher(a=said, b=[w for w, _, _ in heard], autojunk=False)
    first, last = 0, len(heard)
    for a, b, size in matcher.get_matching_blocks():
        for i in range(size):
            if a + i < len(before):
                first = max(first, b + i + 1)
            elif a + i > len(before):
                last = min(last, b + i)
    if first >= last:
        return None
    return heard[first][1], heard[last - 1][2]


def secret(text: str, span: tuple[int, int], entity: str) -> list[tuple[int, int]]:
    """What of ``span`` must not survive: of a number, its digits and number
    words (not the words misheard around them); of anything else, its words."""
    start, end = span
    return [
        (start + m.start(), start + m.end())
        for m in re.finditer(r"\w+", text[start:end])
        if m.group().lower() not in _NOT_SECRET
        and (entity not in _NUMBERS or _is_number(m.group()))
    ]


def _is_number(word: str) -> bool:
    lower = word.lower()
    return any(c.isdigit() for c in word) or lower in _NUMBER_WORDS


def relabel(path: Path) -> None:
    """Recompute the spans and secrets of ``path`` (its texts stay)."""
    said = {" ".join(p for p in (i.before, i.said, i.after) if p): i for i in items()}
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        item = said[row["said"]]
        span = locate(item, row["text"])
        row["span"] = list(span) if span else None
        row["secret"] = [list(s) for s in secret(row["text"], span, row["entity"])] if span else []
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=SPOKEN)
    parser.add_argument("--model", default="tiny.en")
    parser.add_argument(
        "--relabel", action="store_true", help="recompute spans and secrets of --out only"
    )
    args = parser.parse_args()
    if args.relabel:
        relabel(args.out)
        return
    engine = create_engine("faster-whisper", args.model)
    options = EngineOptions(language="en", threads=2)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        said = [(item, take) for item in items() for take in range(TAKES)]
        for n, (item, take) in enumerate(said):
            voice = VOICES[(n // TAKES * 5 + take * 3) % len(VOICES)]
            speed = SPEEDS[(n // TAKES + take) % len(SPEEDS)]
            sentence = " ".join(p for p in (item.before, item.said, item.after) if p)
            wav = Path(folder) / "said.wav"
            subprocess.run(
                ["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(wav), sentence],
                check=True,
                capture_output=True,
            )
            audio = decode(wav).samples
            text = " ".join(s.text.strip() for s in engine.transcribe(audio, options)).strip()
            span = locate(item, text)
            row = {
                "text": text,
                "said": sentence,
                "entity": item.entity,
                "voice": voice,
                "speed": speed,
                "span": list(span) if span else None,
                "secret": [list(s) for s in secret(text, span, str(item.entity))] if span else [],
            }
            rows.append(row)
            print(f"{item.entity or '-':<15} {voice:<15} {text}", flush=True)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} items -> {args.out}")


if __name__ == "__main__":
    main()
