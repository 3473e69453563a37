"""Email addresses, street addresses and IBANs as speech recognition writes
them: found by the statement around them ("my email is", "I live at", "my IBAN
is"), whatever became of their words; ordinary speech with the same words stays."""

from __future__ import annotations

import re

import pytest

from voxwire.text.redaction import Redactor
from voxwire_client.api import RedactMode


@pytest.fixture(scope="module")
def redactor() -> Redactor:
    return Redactor()


def _entity(redactor: Redactor, text: str) -> str:
    return redactor.redact(text, RedactMode.ENTITY)


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("my email is peter smith at gmail dot com", "peter smith at gmail dot com"),  # two words
        ("my email is peter smith at gmail.com", "peter smith at gmail.com"),
        ("my email is peter smith gmail.com", "peter smith gmail.com"),  # "at" lost
        ("my email is peter smith at gmail", "peter smith at gmail"),  # no top-level domain
        ("My email address is jane doe at example.co.uk, thanks.", "jane doe at example.co.uk"),
        ("email: jane doe at example dot com", "jane doe at example dot com"),
        ("write to jane doe at example dot com please", "jane doe at example dot com"),
        ("reach me at peter dot smith at gmail dot com", "peter dot smith at gmail dot com"),
        ("Right to jane.com.", "jane.com"),  # "Write to ..." as the engine heard it
        ("Right to peter smith that email.com please.", "peter smith that email.com"),
        ("Send it to peter at acme dot org.", "peter at acme dot org"),
        ("Write to me at jane doe at example dot com.", "jane doe at example dot com"),
    ],
)  # fmt: skip
def test_an_email_address_in_an_email_statement_is_redacted(
    redactor: Redactor, text: str, address: str
) -> None:
    assert _entity(redactor, text) == text.replace(address, "[EMAIL_ADDRESS]")


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("I live at 12 Oak Lain.", "12 Oak Lain"),  # the street type misheard
        ("I live at 12 o'clock in.", "12 o'clock in"),
        ("My address is 42 Elm Avnue, Springfield.", "42 Elm Avnue"),
        ("my address is 221B Baker Street", "221B Baker Street"),  # letters in the number
        ("I live at 42mm Avenue.", "42mm Avenue"),
        ("she lives at 7 Rue de Rivoli", "7 Rue de Rivoli"),
        ("I leave at 42 milli-man-new.", "42 milli-man-new"),  # "live", no time of day
        ("Send it to 40 to El Maven, please.", "40 to El Maven"),  # "forty two" as "40 to"
        ("Deliver it to 12 Downing Street today.", "12 Downing Street"),
        ("Address: 42 Elm Avnue.", "42 Elm Avnue"),
        ("She lives at number 9 Rosemary Close.", "9 Rosemary Close"),
    ],
)
def test_a_street_address_after_i_live_at_or_my_address_is_is_redacted(
    redactor: Redactor, text: str, address: str
) -> None:
    assert _entity(redactor, text) == text.replace(address, "[STREET_ADDRESS]")


@pytest.mark.parametrize(
    ("text", "iban"),
    [
        ("my IBAN is G B 82 W E S T 1234 5698 7654 32", "G B 82 W E S T 1234 5698 7654 32"),
        ("my IBAN is G B eight two, W E S T, one two three four, five six nine eight, "
         "seven six five four, three two", "G B eight two, W E S T, one two three four, "
         "five six nine eight, seven six five four, three two"),
        ("my IBAN is DE 89 3704 0044 0532 0130 00", "DE 89 3704 0044 0532 0130 00"),
        ("my IBAN is D E 8 9 3 7 0 4 0 0 4 4 0 5 3 2 0 1 3 0 0 0",
         "D E 8 9 3 7 0 4 0 0 4 4 0 5 3 2 0 1 3 0 0 0"),
        ("the IBAN is GB82WEST12345698765433", "GB82WEST12345698765433"),  # a digit misheard
        ("pay it to G B 82 W E S T 1234 5698 7654 32 today", "G B 82 W E S T 1234 5698 7654 32"),
    ],
)  # fmt: skip
def test_an_iban_said_letter_by_letter_is_redacted(
    redactor: Redactor, text: str, iban: str
) -> None:
    assert _entity(redactor, text) == text.replace(iban, "[IBAN_CODE]")


@pytest.mark.parametrize(
    ("text", "value", "entity"),
    [
        ("My IBAN is VDA time, 3 7 0 4, 0 0 0 4, 0 5 3 2, 0 1 3 0, 0 0",
         "VDA time, 3 7 0 4, 0 0 0 4, 0 5 3 2, 0 1 3 0, 0 0", "ACCOUNT_NUMBER"),
        ("My account number is oh well 1234 5678 9012.", "oh well 1234 5678 9012",
         "ACCOUNT_NUMBER"),
        ("The account is limited to $1.2.25, $5.6, $7.64, $3.2.",
         "limited to $1.2.25, $5.6, $7.64, $3.2", "ACCOUNT_NUMBER"),
    ],
)  # fmt: skip
def test_the_words_between_is_and_a_personal_number_go_with_it(
    redactor: Redactor, text: str, value: str, entity: str
) -> None:
    """The engine wrote an identifier's letters as words."""
    assert _entity(redactor, text) == text.replace(value, f"[{entity}]")


@pytest.mark.parametrize(
    ("text", "number", "entity"),
    [
        ("The credit card is 14-1, the land-run, the land-run, the land-run.", "14-1",
         "CREDIT_CARD"),
        ("My car number is 55, only a long year old, only a long year old, only a long year old",
         "55", "NUMBER"),
        ("the SSN is 536 22, 12, 12, 12, 12", "536 22, 12, 12, 12, 12", "US_SSN"),
    ],
)  # fmt: skip
def test_a_number_whose_digits_were_lost_in_a_loop_is_redacted(
    redactor: Redactor, text: str, number: str, entity: str
) -> None:
    assert _entity(redactor, text) == text.replace(number, f"[{entity}]", 1)


@pytest.mark.parametrize(
    "text",
    [
        "my email is down at the moment",
        "I am right to say that example.com is slow.",
        "Right to the point, google.com works.",
        "Go to google.com for details.",
        "Write to me at the office, please.",
        "Contact us at the front desk.",
        "We live at 5 minutes from the station.",
        "The show goes live at 12 o'clock tonight.",
        "I leave at 5 tomorrow.",
        "I leave at 1530 every day.",
        "We leave at 7.45 from gate 9.",
        "Send it to 40 people, please.",
        "Send it to 3 New York offices.",
        "Send it to 12 customers in London.",
        "She lives at home with 2 cats.",
        "She lives at number 9 with her mother.",
        "I live at the end of the road.",
        "The credit card is 14 days late.",
        "Our IBAN changed last year and the account is held at Barclays.",
        "The model XR 2000 costs 300 dollars.",
    ],
)
def test_ordinary_speech_with_the_same_words_stays(redactor: Redactor, text: str) -> None:
    assert _entity(redactor, text) == text


def test_a_statement_split_over_two_finals_is_redacted_in_the_second(
    redactor: Redactor,
) -> None:
    email = redactor.tail("Right, my email is")
    second = "peter smith at gmail dot com, thanks."
    assert redactor.redact(second, RedactMode.ENTITY, before=email) == "[EMAIL_ADDRESS], thanks."
    address = redactor.tail("I live at")
    assert redactor.redact("12 Oak Lain.", RedactMode.ENTITY, before=address) == (
        "[STREET_ADDRESS]."
    )
    # without the statement, a name and a street are nobody's
    assert _entity(redactor, "12 Oak Lain.") == "12 Oak Lain."


def test_a_partial_shows_no_word_of_an_address_being_said(redactor: Redactor) -> None:
    said = "my email is peter smith at gmail dot com, thanks"
    for end in [m.end() for m in re.finditer(r"\S+", said)][3:]:
        shown = redactor.redact(said[:end], RedactMode.MASK, partial=True)
        assert not re.search(r"peter|smith|gmail", shown), shown
    for partial in ("My IBAN is V8i", "the IBAN is G B 82 W"):
        shown = redactor.redact(partial, RedactMode.MASK, partial=True)
        assert not re.search(r"\d", shown), shown
