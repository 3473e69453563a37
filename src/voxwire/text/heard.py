"""Personal data as speech recognition hears it, found by what is said around it.
Pure code, no I/O; :mod:`voxwire.text.redaction` uses it.

The engine writes what it heard, and an email address, a street or an IBAN
said aloud rarely comes out whole: "peter smith at gmail dot com" loses its
"at" or gets a name of two words, "oak lane" becomes "o'clock in", "G B eight
two, W E S T" stays a row of letters. What stays is the statement around it, so
these rules read the statement:

==================  ==========================================================
EMAIL_ADDRESS       after "my email (address) is", "email me at", "reach me at",
                    "write to", "send it to" (and "Right to ...", as the engine
                    writes "Write to ..."): the words up to a domain
                    ("gmail.com", "gmail dot com") within :data:`EMAIL_WORDS`
                    words and the sentence; after an email word, up to "at
                    <word>" too ("peter smith at gmail"); a domain with two
                    dots or more anywhere (``jane.go.atenlampl.com``), any
                    domain after "email"/"mail"
STREET_ADDRESS      after "I live at", "she lives at (number)", "my address
                    is": a house number ("12", "221B", "42mm", "twelve") and up
                    to :data:`STREET_WORDS` words, whatever the street type
                    became, unless the first is no street's ("5 minutes", "9
                    with"); after "I leave at" (as heard) the same when the
                    number is no time of day; after "send it to", "deliver it
                    to": a number and a street type or names in capitals
IBAN_CODE           letters and digits in a row that make an IBAN once joined
                    ("G B 82 W E S T 1234 ...", "DE 89 3704 ..."): with a valid
                    check anywhere, whatever the check after "IBAN", "account"
                    or "bank"
(the same entity)   a personal number said as the value of a statement ("my
                    IBAN is VDA time, 3 7 0 4 ...") takes the words between
                    "is" and the number with it: the engine wrote an
                    identifier's letters as words
==================  ==========================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from voxwire.text.normalization import normalize
from voxwire.text.number_runs import Span, runs

__all__ = ["STREET_TYPES", "heard_addresses", "heard_emails", "spelled_ibans", "statement_values"]

EMAIL_WORDS = 8
"""At most this many words between an email context and the end of the domain."""
STREET_WORDS = 3
"""Words after a house number taken as the street when no street type is heard."""
STATEMENT_WORDS = 3
"""Words between "is" and a personal number taken with it."""
CONTEXT_WORDS = 6

_TLD = r"(?:com|org|net|edu|gov|io|info|biz|co|uk|de|fr|es|it|nl|us|ca|au|in)"
_DOMAIN = re.compile(
    rf"(?<![\w@.])(?!www\.)[\w-]+(?:\.[\w-]+)*\.{_TLD}\b",
    re.IGNORECASE,
)
_DOMAIN_END = re.compile(rf"(?:(?:\.|\s+dot\s+){_TLD}\b)+", re.IGNORECASE)
_AT_WORD = re.compile(  # a domain said without its top-level part, ending the statement
    r"\bat\s+[A-Za-z]+(?=\s*(?:[.,;!?]|$)|\s+(?:please|thanks|thank)\b)", re.IGNORECASE
)
_EMAIL_WORD = frozenset({"email", "emails", "e-mail", "mail", "mailbox", "inbox"})
_EMAIL_CONTEXT = re.compile(
    r"\b(?:e-?mail(?:\s+address)?\s+(?:is|was)|e-?mail(?:\s+address)?:"
    r"|(?:e-?mail|reach|contact|write)\s+(?:me|us|him|her|them)\s+at"
    r"|(?:write|send|sent|mail|e-?mail|forward)\s+(?:(?:it|this|that|them)\s+)?to"
    r"|(?:^|(?<=[.!?]\s))right\s+to)(?!\w)",  # "Write to ...", as heard
    re.IGNORECASE,
)
_LEAD = re.compile(r"[\s,:]*(?:(?:is|was|(?:me|us)\s+at)\b[\s,:]*)?", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[,;!?]|\.(?=\s+[A-Z])|\.\s*$")

STREET_TYPES = (
    "street", "st", "avenue", "ave", "road", "rd", "boulevard", "blvd", "lane", "ln", "drive",
    "dr", "way", "court", "ct", "place", "pl", "terrace", "parkway", "highway", "square",
)  # fmt: skip
_NOT_A_STREET = frozenset((
    "the", "a", "an", "of", "to", "in", "on", "up", "down", "along", "across", "this", "that",
    "my", "our", "your", "minutes", "minute", "miles", "mile", "blocks", "block", "feet",
    "meters", "metres", "houses", "doors", "times", "hours", "hour", "years", "days", "people",
    "percent", "am", "pm", "with", "for", "from", "by", "near", "at", "is", "was", "or", "if",
    "when", "who", "which",
))  # fmt: skip
_STREET_END = frozenset((
    "please", "thanks", "thank", "okay", "ok", "and", "but", "so", "because", "today",
    "tomorrow", "now", "then",
))  # fmt: skip
_ADDRESS_CONTEXT = re.compile(
    r"\b(?:(?P<live>(?:i|we|you|they)\s+(?:still\s+)?live|(?:he|she|who)\s+lives|living)\s+at"
    r"|(?P<leave>(?:i|we)\s+leave\s+at)"
    r"|(?:address\s+(?:is|was)|address:)"
    r"|(?P<send>(?:send|ship|deliver|post|mail|bring)\s+(?:(?:it|this|that|them)\s+)?to))(?!\w)",
    re.IGNORECASE,
)
_HOUSE = re.compile(r"[\s,]*(?:(?:number|no\.?)\s+)?", re.IGNORECASE)
_TENS_THEN_DIGIT = frozenset({"to", "too", "for"})  # "forty two" heard as "40 to"

_IBAN_CONTEXT = frozenset({"iban", "account", "bank"})
_IBAN_SHAPE = re.compile(r"[A-Z]{2}\d{2}[A-Z0-9]{10,30}")
_GAP = re.compile(r"[\s,.\-]*")
_STATEMENT = re.compile(
    r"(?:\b(?:my|your|his|her|our|their|the)\s+(?:[\w'’-]+\s+){1,3}?(?:is|was)\b|:)[\s,]*"
    rf"(?P<words>(?:[\w'’-]+[,;]?\s+){{1,{STATEMENT_WORDS}}})[$£€#]?$",
    re.IGNORECASE,
)


def heard_emails(text: str, before: Sequence[str] = (), *, partial: bool = False) -> list[Span]:
    """Email addresses in ``text`` as the engine wrote them (see the module's
    table), after a final that ended with the words ``before``. ``partial`` (an
    unfinished text): also the words of an address not yet said to its end."""
    return _continued(text, before, lambda t: _emails(t, partial))


def heard_addresses(text: str, before: Sequence[str] = ()) -> list[Span]:
    """Street addresses said after "I live at", "my address is", "send it to",
    ..., whatever became of their street type; after a final that ended with
    the words ``before``."""
    return _continued(text, before, _addresses)


def _emails(text: str, partial: bool) -> list[Span]:
    words = [(m.start(), m.group().lower()) for m in re.finditer(r"[A-Za-z]+", text)]
    found = []
    for m in _DOMAIN.finditer(text):
        before = [w for pos, w in words if pos < m.start()][-CONTEXT_WORDS:]
        if m.group().count(".") >= 2 or _EMAIL_WORD.intersection(before):
            found.append(Span("EMAIL_ADDRESS", m.start(), m.end()))
    for m in _EMAIL_CONTEXT.finditer(text):
        lead = _LEAD.match(text, m.end())
        start = lead.end() if lead else m.end()
        window = _window(text, start, EMAIL_WORDS)
        end = _DOMAIN_END.search(text, start, window)
        if end is None and _EMAIL_WORD.intersection(m.group().lower().split()):
            end = _AT_WORD.search(text, start, window)
        if end is not None and end.start() > start:
            found.append(Span("EMAIL_ADDRESS", start, end.end()))
        elif partial and window == len(text) and re.search(r"\w", text[start:]):
            found.append(Span("EMAIL_ADDRESS", start, len(text)))
    return found


def _addresses(text: str) -> list[Span]:
    numbers = runs(text)
    found = []
    for m in _ADDRESS_CONTEXT.finditer(text):
        house = _HOUSE.match(text, m.end())
        start = house.end() if house else m.end()
        run = next((r for r in numbers if r.start <= start < r.end), None)
        if run is None or (m.group("leave") and _clock_time(text[start : run.end])):
            continue
        street = list(re.finditer(r"[\w'’-]+|[^\w\s]", text[run.end :]))
        tens = re.fullmatch(r"[2-9]0", text[start : run.end])
        if street and street[0].group().lower() in _TENS_THEN_DIGIT and tens:
            street = street[1:]
        taken: list[re.Match[str]] = []
        for word in street[: STREET_WORDS + 1]:
            lower = word.group().lower()
            if not word.group()[0].isalnum() or lower in _STREET_END:
                break
            taken.append(word)
            if lower in STREET_TYPES:
                break
        typed = bool(taken) and taken[-1].group().lower() in STREET_TYPES
        taken = taken if typed else taken[:STREET_WORDS]
        if not taken or taken[0].group().lower() in _NOT_A_STREET:
            continue
        named = all(w.group()[0].isupper() for w in taken)
        if m.group("send") and not (typed or named):
            continue
        found.append(Span("STREET_ADDRESS", start, run.end + taken[-1].end()))
    return found


def spelled_ibans(text: str) -> list[Span]:
    """IBANs said group by group or letter by letter: capital letters and digits
    in a row that join into an IBAN's shape, with a valid check, or after an
    IBAN, account or bank word whatever the check."""
    found = []
    row: list[tuple[int, int, str]] = []
    for token in normalize(text):
        part = _iban_part(text[token.start : token.end], token.text)
        if part and row and _GAP.fullmatch(text[row[-1][1] : token.start]):
            row.append((token.start, token.end, part))
            continue
        found += _iban_in(text, row)
        row = [(token.start, token.end, part)] if part else []
    return found + _iban_in(text, row)


def statement_values(text: str, spans: Sequence[Span]) -> list[Span]:
    """``spans`` that are the value of a statement ("my IBAN is ..."), widened
    back over the (at most :data:`STATEMENT_WORDS`) words between "is" and them."""
    found = []
    for span in spans:
        m = _STATEMENT.search(text, 0, span.start)
        if m is not None:
            found.append(Span(span.entity, m.start("words"), span.end))
    return found


def _continued(text: str, before: Sequence[str], find: Callable[[str], list[Span]]) -> list[Span]:
    """What ``find`` finds in ``text`` read after the words ``before`` (the
    previous final's context, "my email is" | "peter smith at gmail dot com"):
    what started there and goes on into ``text`` is taken from its start."""
    if not before:
        return find(text)
    lead = " ".join(before) + " "
    return [
        Span(s.entity, max(0, s.start - len(lead)), s.end - len(lead))
        for s in find(lead + text)
        if s.end > len(lead)
    ]


def _window(text: str, start: int, words: int) -> int:
    """Where ``words`` words after ``start`` end, or the sentence does."""
    end = len(text)
    for n, m in enumerate(re.finditer(r"\S+", text[start:])):
        if n == words:
            end = start + m.start()
            break
    stop = _SENTENCE_END.search(text, start, end)
    return stop.start() + 1 if stop else end


def _clock_time(number: str) -> bool:
    """Whether a number after "I leave at" can be a time of day ("5", "1530", "7.45")."""
    digits = re.sub(r"\D", "", number)
    if not digits or len(digits) > 4 or len(digits) != len(re.sub(r"[^\w]", "", number)):
        return False
    hours, minutes = (digits[:-2], digits[-2:]) if len(digits) > 2 else (digits, "0")
    return int(hours or 0) <= 24 and int(minutes) < 60


def _iban_part(written: str, normalized: str) -> str:
    """What a word adds to an IBAN said aloud: its digits, or its capital letters."""
    if normalized.isdigit():
        return normalized
    if re.fullmatch(r"[A-Z0-9]{1,34}", written) and not written.isdigit() and written != "I":
        return written
    return ""


def _iban_in(text: str, row: list[tuple[int, int, str]]) -> list[Span]:
    """The IBAN a row of letters and digits ends with, if any."""
    for first in range(len(row)):
        candidate = "".join(p for _, _, p in row[first:])
        if not _IBAN_SHAPE.fullmatch(candidate):
            continue
        words = [w.lower() for w in re.findall(r"[A-Za-z]+", text[: row[first][0]])]
        if _mod97(candidate) or _IBAN_CONTEXT.intersection(words[-CONTEXT_WORDS:]):
            return [Span("IBAN_CODE", row[first][0], row[-1][1])]
    return []


def _mod97(iban: str) -> bool:
    moved = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1
