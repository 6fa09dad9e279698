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


# -- pre-filters (issue 12): a text is skipped by a pattern only when it cannot match ------------

_FRAGMENTS = (
    "password: hunter2", "db PASSWORD = 'S3cr3t!'", "my pasſword is x9!", "api_key=abc123",
    "token: tok", "PİN is 1234", "sk-proj-abcdefghijklmnopqrstuvwxyz0123", "AKIAIOSFODNN7EXAMPLE",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
    "github_pat_11ABCDEFG0123456789abcdef", "glpat-abcdefghijklmnopqrst", "xoxb-1234567890-abc",
    "sk_live_abcdefghijklmnop1234", "hf_abcdefghijklmnopqrstuvwxyz0123456", "npm_" + "a1" * 18,
    "eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4f",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "AIzaSyA1234567890abcdefghijklmnopqrstu",
    "postgresql://app:pw123@db/app", "Bearer abcdefghijklmnopqrstuvwxyz012345",
    "4111 1111 1111 1111", "3782-822463-10005", "4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
    "DE89 3704 0044 0532 0130 00", "GB82WEST12345698765432", "123-45-6789", "046 454 286",
    "RSSMRA85T10A562S", "12345678Z", "X1234567L", "1 84 12 76 451 089 46", "756.1234.5678.97",
    "4991 1866 5246", "111.444.777-35", "85.07.30-033.28", "130 692 544", "130-692-544", "131052-308T", "811228-9874",
    "19811228-9874", "SSN", "passport number X1234567", "ſocial security number 078-05-1120",
    "national insurance QQ 12 34 56 C", "tax id 12 345 678 901", "ID card no. AB123456",
    "jane.doe@client.com", "+1 415 555 0199", "(555) 123-4567", "555.123.4567",
    "030 12345678", "0049 30 1234567", "phone 1234567", "TEL: 12 34 56 78", "mobile is +4930123",
    "2026-06-17 12:00 UTC", "note 12, 61681", "\u0663\u0664\u0665-\u0661\u0662-\u0666\u0667\u0668\u0669",
    "٤١١١ ١١١١ ١١١١ ١١١١", "café", "KELVIN \u212a", "-", ".", " ", "\n", "0", "7", "+", "@", "/", ":",
    "a", "Z", "_", "x", "A", "B",
)


def test_the_pre_filters_never_skip_a_pattern_that_would_match() -> None:
    import random

    from dbmemory.profile.detectors import OwnContacts, scan_with

    rng = random.Random(12)
    own = OwnContacts.of(["me@example.com"], ["+49 30 1234567"])
    for _ in range(3000):
        parts = [rng.choice(_FRAGMENTS) for _ in range(rng.randrange(1, 6))]
        text = "".join(rng.choice(("", " ", "\n", "-", ".", ":", "0")) + p for p in parts)
        for contacts in (OwnContacts(), own):
            assert scan_with(text, contacts, gated=True) == scan_with(text, contacts, gated=False), text
