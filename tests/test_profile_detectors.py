"""Deterministic checks after the scrub: secrets, cards, IBANs, national ids, contacts."""

from __future__ import annotations

import pytest

from dbmemory.profile.detectors import KINDS, OwnContacts, own_contacts_from_text, scan


@pytest.mark.parametrize(
    ("text", "kind", "redacted"),
    [
        ("- password: hunter2", "secret", "- password: [redacted:secret]"),
        ("- db password = 'S3cr3t!'", "secret", "- db password = '[redacted:secret]'"),
        ("- my password is hunter2!", "secret", "- my password is [redacted:secret]"),
        ("- key sk-proj-abcdefghijklmnopqrstuvwxyz0123", "secret", "- key [redacted:secret]"),
        ("- AWS AKIAIOSFODNN7EXAMPLE", "secret", "- AWS [redacted:secret]"),
        ("- token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "secret", "- token [redacted:secret]"),
        ("- api_key: AIzaSyA1234567890abcdefghijklmnopqrstu", "secret", "- api_key: [redacted:secret]"),
        ("- dsn postgresql://app:pw123@db/app", "secret", "- dsn postgresql://app:[redacted:secret]@db/app"),
        ("- uses Bearer abcdefghijklmnopqrstuvwxyz012345", "secret", "- uses Bearer [redacted:secret]"),
        ("- card 4111 1111 1111 1111", "card", "- card [redacted:card]"),
        ("- Amex 3782-822463-10005", "card", "- Amex [redacted:card]"),
        ("- IBAN DE89 3704 0044 0532 0130 00", "iban", "- IBAN [redacted:iban]"),
        ("- pays to GB82WEST12345698765432", "iban", "- pays to [redacted:iban]"),
        ("- SSN 123-45-6789", "national_id", "- SSN [redacted:national_id]"),
        ("- codice fiscale RSSMRA85T10A562S", "national_id", "- codice fiscale [redacted:national_id]"),
        ("- DNI 12345678Z", "national_id", "- DNI [redacted:national_id]"),
        ("- passport number X1234567", "national_id", "- passport number [redacted:national_id]"),
        ("- client contact jane.doe@client.com", "email", "- client contact [redacted:email]"),
        ("- call Bob at +1 415 555 0199", "phone", "- call Bob at [redacted:phone]"),
        ("- desk (555) 123-4567", "phone", "- desk [redacted:phone]"),
        ("- office phone 030 12345678", "phone", "- office phone [redacted:phone]"),
    ],
)
def test_each_kind_is_redacted_with_its_marker_and_counted(text: str, kind: str, redacted: str) -> None:
    result = scan(text)
    assert result.text == redacted
    assert result.counts == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        "- I reset my password yesterday",
        "- the password is stored in the vault",
        "- Password policy: rotate monthly",
        "- password: reset monthly by IT",
        "- asks about password managers and token budgets",
        "- 2026-06-17 12:00 UTC: discussed SQL tuning",
        "- order number 1234567890123",
        "- version 1.2.3, pi 3.14159, 42 tables, 100,000 rows",
        "- likes 🍕🍕🍕 and café",
        "- works 09:00-17:30, timezone UTC+2",
        "- password: [redacted:secret]",
    ],
)
def test_prose_and_ordinary_numbers_are_not_hits(text: str) -> None:
    result = scan(text)
    assert result.text == text and result.counts == {}


def test_the_users_own_contacts_are_kept() -> None:
    own = OwnContacts.of(["Me@Example.com"], ["+49 30 1234567"])
    text = "- e-mail me@example.com\n- phone 030 1234567\n- boss boss@example.com"
    result = scan(text, own=own)
    assert result.text == "- e-mail me@example.com\n- phone 030 1234567\n- boss [redacted:email]"
    assert result.counts == {"email": 1}


def test_contacts_declared_as_own_in_the_users_message_are_recognised() -> None:
    own = own_contacts_from_text(
        "My work email is dana@corp.example. Please write to alice@client.example! "
        "You can reach me at +44 20 7946 0958."
    )
    assert own.is_own_email("dana@corp.example")
    assert not own.is_own_email("alice@client.example")
    assert own.is_own_phone("020 7946 0958")


def test_scanning_redacted_text_again_finds_nothing() -> None:
    text = (
        "- password: hunter2\n- card 4111-1111-1111-1111\n- IBAN DE89370400440532013000\n"
        "- SSN 123-45-6789\n- x@y.example\n- +33 1 23 45 67 89"
    )
    first = scan(text)
    assert set(first.counts) == set(KINDS)
    second = scan(first.text)
    assert second.text == first.text and second.counts == {}
