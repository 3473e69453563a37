"""What the spoken set says (benchmarks/make_spoken_pii.py): sentences with personal
data in the ways people say it, the voices and speeds espeak-ng says them in, and
where an engine's text holds what was said and what of it must not survive."""

from __future__ import annotations

import difflib
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from voxwire.audio.decoding import Audio, decode

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

    @property
    def sentence(self) -> str:
        return " ".join(p for p in (self.before, self.said, self.after) if p)


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


def words(text: str) -> list[tuple[str, int, int]]:
    return [(m.group().lower(), m.start(), m.end()) for m in re.finditer(r"[\w']+", text)]


def gaps(said: list[str | None], heard: list[str]) -> list[tuple[int, int]]:
    """For each gap (None) of ``said``, the words said around personal data, the
    range [first, last) of ``heard`` between the last recognised word said before
    the gap and the first said after it (first >= last: nothing lies between)."""
    blocks = difflib.SequenceMatcher(a=said, b=heard, autojunk=False).get_matching_blocks()
    matched = [(a + i, b + i) for a, b, size in blocks for i in range(size)]
    return [
        (
            max((b + 1 for a, b in matched if a < gap), default=0),
            min((b for a, b in matched if a > gap), default=len(heard)),
        )
        for gap, word in enumerate(said)
        if word is None
    ]


def locate(item: Item, text: str) -> tuple[int, int] | None:
    """The span of ``text`` that holds what ``item.said``: between the last
    recognised word of what was said before it and the first of what was said after."""
    if not item.said:
        return None
    heard = words(text)
    said = [w for w, _, _ in words(item.before)] + [None] + [w for w, _, _ in words(item.after)]
    ((first, last),) = gaps(said, [w for w, _, _ in heard])
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


@dataclass(frozen=True)
class Take:
    """An item as espeak-ng says it: in a voice, at a speed (words a minute)."""

    item: Item
    voice: str
    speed: int


def takes(said: list[Item]) -> list[Take]:
    """Each item in :data:`TAKES` voices and speeds, chosen by its place in ``said``."""
    return [
        Take(
            item,
            VOICES[(n * 5 + take * 3) % len(VOICES)],
            SPEEDS[(n + take) % len(SPEEDS)],
        )
        for n, item in enumerate(said)
        for take in range(TAKES)
    ]


def speak(sentence: str, voice: str, speed: int, wav: Path) -> Audio:
    """``sentence`` said by espeak-ng (written to ``wav``), as 16 kHz samples."""
    subprocess.run(
        ["espeak-ng", "-v", voice, "-s", str(speed), "-w", str(wav), sentence],
        check=True,
        capture_output=True,
    )
    return decode(wav).samples
