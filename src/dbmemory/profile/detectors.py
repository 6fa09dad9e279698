"""Deterministic content checks run after the LLM scrub, before any write.

Every hit is **redacted** in place with a marker ``[redacted:<kind>]`` and counted; nothing here
calls a model or the database. Kinds (:data:`KINDS`), checked in this order so one value is
counted once:

* ``secret``: private-key blocks; passwords inside URLs (``scheme://user:pw@host``); well-known
  token formats (OpenAI/Anthropic ``sk-...``, AWS ``AKIA...``, GitHub ``ghp_``/``github_pat_``,
  GitLab ``glpat-``, Slack ``xox?-``, Google ``AIza...``, Stripe ``sk_live_``, Hugging Face
  ``hf_``, JWTs, ``Bearer`` tokens); and values *given* for a secret-like key
  (``password: hunter2``, ``api_key=...``, ``my password is "x9!..."``). The word "password" in
  prose ("reset my password", "the password is stored in the vault") is not a hit: after
  ``is``/``was`` the value must be quoted or contain a digit or symbol, and after ``:``/``=`` a
  plain word followed by more words is prose.
* ``iban``: IBANs validated with :mod:`stdnum.iban` (mod-97 and country format).
* ``card``: 13-19 digit numbers (spaces/dashes allowed) starting 3-6 that pass the Luhn check
  (:mod:`stdnum.luhn`).
* ``national_id``: distinctive formats validated with python-stdnum (US SSN, Canadian SIN,
  Italian codice fiscale, Spanish DNI/NIE, French NIR, Swiss AHV, Indian Aadhaar, Brazilian CPF,
  Belgian national number, Finnish HETU, Swedish personnummer); and any id-like value within a
  few words after an id keyword (``SSN``, ``passport number``, ``national insurance``, ``tax
  id``, ``BSN``, ``PESEL``, ``Steuer-ID`` ...), where no checksum exists (passports).
* ``email`` and ``phone``: addresses and numbers that are **not the user's own**
  (:class:`OwnContacts`: the user id when it is an address, values the host passes, and values
  the user declared as theirs in their own message, see :func:`own_contacts_from_text`).

Scanning redacted text again finds nothing (markers contain no digits or ``@``).

Cost: each pattern first asks a cheap necessary condition of the text (a literal, a stem of the
case-folded text, or a digit layout such as ``000-00-0000``; see "pre-filters" below) and scans
only when it holds, so a ~2,000-token profile without hits is checked in well under a
millisecond instead of ~5 ms. The conditions never reject a text their pattern matches
(tests/profile/test_profile_detectors.py compares gated and ungated scans), so the hits are the same.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from stdnum import iban as std_iban
from stdnum import luhn
from stdnum.be import nn as be_nn
from stdnum.br import cpf as br_cpf
from stdnum.ca import sin as ca_sin
from stdnum.ch import ssn as ch_ssn
from stdnum.es import dni as es_dni
from stdnum.es import nie as es_nie
from stdnum.fi import hetu as fi_hetu
from stdnum.fr import nir as fr_nir
from stdnum.in_ import aadhaar as in_aadhaar
from stdnum.it import codicefiscale as it_cf
from stdnum.se import personnummer as se_pnr
from stdnum.us import ssn as us_ssn

__all__ = [
    "KINDS",
    "OwnContacts",
    "ScanResult",
    "scan",
    "redaction_marker",
    "own_contacts_from_text",
    "find_emails",
    "find_phones",
    "scan_with",
]

KINDS: tuple[str, ...] = ("secret", "iban", "card", "national_id", "email", "phone")
"""Detector kinds, in checking order (also the metric label set)."""


def redaction_marker(kind: str) -> str:
    """The text that replaces a redacted value, e.g. ``[redacted:card]``."""
    return f"[redacted:{kind}]"


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _phone_key(text: str) -> str:
    digits = _digits(text)
    if digits.startswith("00"):
        digits = digits[2:]
    return digits.lstrip("0")


@dataclass(frozen=True)
class OwnContacts:
    """The signed-in user's own e-mail addresses and phone numbers (never redacted).

    Attributes:
        emails: addresses, compared case-insensitively.
        phones: numbers in any notation; compared on digits, ignoring a ``+``/``00`` prefix and
            leading zeros, and matching when one ends with the other (at least 7 digits), so
            ``+49 30 1234567`` and ``030 1234567`` are the same number.
    """

    emails: frozenset[str] = field(default_factory=frozenset)
    phones: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, emails: Iterable[str] = (), phones: Iterable[str] = ()) -> OwnContacts:
        """Build from any iterables of strings."""
        return cls(frozenset(e.strip().lower() for e in emails if e.strip()), frozenset(phones))

    def merged(self, other: OwnContacts) -> OwnContacts:
        """The union of both."""
        return OwnContacts(self.emails | other.emails, self.phones | other.phones)

    def is_own_email(self, value: str) -> bool:
        """Whether ``value`` is one of the user's addresses."""
        return value.strip().lower() in self.emails

    def is_own_phone(self, value: str) -> bool:
        """Whether ``value`` is one of the user's numbers (see the class doc)."""
        key = _phone_key(value)
        if len(key) < 7:
            return False
        for own in self.phones:
            own_key = _phone_key(own)
            if len(own_key) >= 7 and (key.endswith(own_key) or own_key.endswith(key)):
                return True
        return False


@dataclass(frozen=True)
class ScanResult:
    """The outcome of :func:`scan`.

    Attributes:
        text: the input with every hit replaced by its marker.
        counts: hits per kind (only kinds with hits).
    """

    text: str
    counts: dict[str, int]

    @property
    def total(self) -> int:
        """All hits."""
        return sum(self.counts.values())


# --------------------------------------------------------------------------- patterns

_EMAIL = re.compile(r"(?<![\w.+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]*@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}(?![\w\-])")

_PHONE_PATTERNS = (
    # international: +CC ...
    re.compile(r"(?<![\w+\-])\+\d{1,3}(?:[ .\-]?\(?\d{1,5}\)?){2,6}(?![\w])"),
    # national trunk prefix 0 ...
    re.compile(r"(?<![\w.\-+/:])0\d{1,4}(?:[ ./\-]?\(?\d{2,8}\)?){1,4}(?![\w.\-])"),
    # North American (555) 123-4567 / 555-123-4567 / 555.123.4567
    re.compile(r"(?<![\w\-+])(?:\(\d{3}\)[ ]?|\d{3}[.\-])\d{3}[.\-]\d{4}(?![\w\-])"),
    # after a phone keyword: any 7-15 digit run with separators
    re.compile(
        r"(?i)\b(?:phone|mobile|cell|tel|telephone|whatsapp|fax)\b"
        r"(?:\s*(?:number|no\.?|#))?\s*[:=]?\s*(?:is\s+)?(\+?\d[\d ().\-]{5,}\d)"
    ),
)


def find_emails(text: str) -> list[str]:
    """Every e-mail address in ``text``, in order."""
    return [m.group(0) for m in _EMAIL.finditer(text)]


def _phone_ok(candidate: str) -> bool:
    digits = _digits(candidate)
    return 7 <= len(digits) <= 15 and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", candidate.strip())


def find_phones(text: str) -> list[str]:
    """Every phone-number-like value in ``text`` (7-15 digits), in order of the patterns."""
    found: list[str] = []
    for pattern in _PHONE_PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(match.lastindex or 0)
            if _phone_ok(value) and (len(_digits(value)) >= 9 or pattern is _PHONE_PATTERNS[-1]):
                found.append(value)
    return found


_OWN_MARKER = re.compile(
    r"(?i)\b(?:my\s+(?:\w+\s+){0,2}(?:e-?mail|mail|address|phone|number|mobile|cell|telephone|"
    r"contact)|(?:reach|contact|call|text|e-?mail|mail|ping)\s+me|i\s+am\s+reachable)\b"
)


def own_contacts_from_text(text: str) -> OwnContacts:
    """E-mail addresses and phone numbers the user declared as their own in ``text``.

    A value counts when it is in the same sentence or line as a self-reference such as "my
    e-mail is", "my work phone:", "reach me at", "call me on".

    Args:
        text: the user's own message (never the assistant's).

    Returns:
        :class:`OwnContacts` with what was declared (often empty).
    """
    emails: list[str] = []
    phones: list[str] = []
    for sentence in re.split(r"(?<=[!?])\s+|\.\s+(?=[A-Z])|\n+", text):
        if _OWN_MARKER.search(sentence):
            emails.extend(find_emails(sentence))
            phones.extend(find_phones(sentence))
    return OwnContacts.of(emails, phones)


_TOKEN_PATTERNS = (
    re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)"),
    re.compile(r"\bsk-(?:proj-|ant-(?:[a-z]+\d\d-)?|svcacct-)?[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}\b"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}\b"),
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}\b"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b"),
    re.compile(r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}\b"),
    re.compile(r"\bhf_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bnpm_[A-Za-z0-9]{36}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    re.compile(r"(?<=\b[Bb]earer )\s*[A-Za-z0-9\-._~+/]{20,}=*"),
)

_URL_PASSWORD = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:([^\s@/]+)@")

_SECRET_KEYS = (
    r"pass(?:word|wd|phrase|code)?|pwd|pin(?:\s*code)?|secret(?:[_\s\-]?key)?|"
    r"client[_\s\-]?secret|api[_\s\-]?key|access[_\s\-]?key|private[_\s\-]?key|"
    r"auth[_\s\-]?token|access[_\s\-]?token|refresh[_\s\-]?token|token"
)
_ASSIGNMENT = re.compile(
    r"(?i)\b(?:" + _SECRET_KEYS + r")\b(\s*(?:[:=]|\bis\b|\bwas\b)\s*)"
    r"([\"'`])?([^\s\"'`,;]+)(\2)?(\s+\w+)?"
)
_PLACEHOLDER = re.compile(r"(?i)^(?:\[redacted:[a-z_]+\]|\*+|x+|<[^>]*>|none|null|n/?a|unknown|-+)$")


def _assignment(match: re.Match[str]) -> str | None:
    """The replacement for a secret assignment, or None when it is prose."""
    separator, quote, value, closing, following = match.group(1, 2, 3, 4, 5)
    if _PLACEHOLDER.match(value) or value.startswith("[redacted"):
        return None
    quoted = bool(quote) and bool(closing)
    has_symbol = bool(re.search(r"[^A-Za-z]", value))
    if separator.strip() in (":", "="):
        if not quoted and not has_symbol and following:
            return None  # "password: reset monthly" is prose
    elif not quoted and not (has_symbol and len(value) >= 4):
        return None  # "the password is stored in the vault"
    whole = match.group(0)
    start = match.start(3) - match.start(0)
    end = match.end(3) - match.start(0)
    return whole[:start] + redaction_marker("secret") + whole[end:]


_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]){11,30}\b")
_CARD = re.compile(r"(?<![\w\-])\d(?:[ \-]?\d){12,18}(?![\w\-])")


def _card_ok(value: str) -> bool:
    digits = _digits(value)
    return 13 <= len(digits) <= 19 and digits[0] in "3456" and luhn.is_valid(digits)


_NATIONAL_FORMATS: tuple[tuple[re.Pattern[str], Callable[[str], bool]], ...] = (
    (re.compile(r"(?<![\w\-])\d{3}-\d{2}-\d{4}(?![\w\-])"), us_ssn.is_valid),
    (re.compile(r"(?<![\w\-])\d{3}[ \-]\d{3}[ \-]\d{3}(?![\w\-])"), ca_sin.is_valid),
    (re.compile(r"\b[A-Za-z]{6}\d{2}[A-Za-z]\d{2}[A-Za-z]\d{3}[A-Za-z]\b"), it_cf.is_valid),
    (re.compile(r"\b\d{8}-?[A-Za-z]\b"), es_dni.is_valid),
    (re.compile(r"\b[XYZxyz]-?\d{7}-?[A-Za-z]\b"), es_nie.is_valid),
    (
        re.compile(r"\b[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}\b"),
        fr_nir.is_valid,
    ),
    (re.compile(r"\b756[. ]?\d{4}[. ]?\d{4}[. ]?\d{2}\b"), ch_ssn.is_valid),
    (re.compile(r"(?<![\w\-])\d{4} \d{4} \d{4}(?![\w\-])"), in_aadhaar.is_valid),
    (re.compile(r"\b\d{3}\.\d{3}\.\d{3}-\d{2}\b"), br_cpf.is_valid),
    (re.compile(r"\b\d{2}\.\d{2}\.\d{2}-\d{3}\.\d{2}\b"), be_nn.is_valid),
    (re.compile(r"\b\d{6}[-+A]\d{3}[0-9A-Y]\b"), fi_hetu.is_valid),
    (re.compile(r"\b(?:\d{2})?\d{6}[-+]\d{4}\b"), se_pnr.is_valid),
)

_ID_KEYWORD = re.compile(
    r"(?i)\b(?:ssn|social\s+security(?:\s+number)?|national\s+(?:insurance|id(?:entity)?|"
    r"identification)(?:\s+(?:number|no\.?|card))?|nino|passport(?:\s+(?:number|no\.?))?|"
    r"tax\s+(?:id|identification|number|code)|personal\s+(?:id|identity|identification)\s+number|"
    r"id(?:entity)?\s+(?:card\s+)?(?:number|no\.?)|driv(?:er'?s?|ing)\s+licen[cs]e(?:\s+number)?|"
    r"bsn|personnummer|pesel|steuer-?id(?:entifikationsnummer)?|idnr|aadhaar|nhs\s+number|"
    r"medicare\s+number|codice\s+fiscale|sozialversicherungsnummer|cpr(?:-nummer)?|"
    r"f[øo]dselsnummer|henkil[öo]tunnus)\b"
    r"(\W{1,5}(?:\w+\W{1,3}){0,3}?)"
    r"([A-Za-z]{0,3}[\d][A-Za-z\d\-./ ]{3,22}[A-Za-z\d])"
)


def _national_keyword(match: re.Match[str]) -> str | None:
    value = match.group(2)
    if len(_digits(value)) < 4:
        return None
    whole = match.group(0)
    start = match.start(2) - match.start(0)
    return whole[:start] + redaction_marker("national_id")


# --------------------------------------------------------------------------- pre-filters
#
# Each pattern runs only when a cheap necessary condition on the current text holds, so a text
# that cannot match is not scanned by it (a leading ``\b`` or look-behind makes Python's ``re``
# try the pattern at every position). No condition rejects a text its pattern matches, so every
# detection stays; a text that passes is scanned by the unchanged pattern. The conditions look at
# three views of the text (:class:`_View`), each made once per text:
#
# * the text itself: literals every match contains (case-sensitive patterns);
# * the *fold* (case-folded, the two Turkish i's made plain, so each character ``re`` matches
#   case-insensitively to an ASCII letter becomes that letter): stems of the case-insensitive
#   patterns;
# * the *shape* (every decimal digit ``\d`` becomes ``0``) and the *dense* shape (also without
#   spaces and dashes): digit layouts such as ``000-00-0000`` found with ``in``.


class _View:
    """The text being scanned and its fold and shapes, each made on first use."""

    __slots__ = ("text", "_fold", "_shape", "_dense")

    def __init__(self, text: str) -> None:
        self.text = text
        self._fold: str | None = None
        self._shape: str | None = None
        self._dense: str | None = None

    def fold(self) -> str:
        if self._fold is None:
            self._fold = self.text.casefold().replace("\u0131", "i").replace("\u0307", "")
        return self._fold

    def shape(self) -> str:
        if self._shape is None:
            if self.text.isascii():
                self._shape = self.text.encode("ascii").translate(_ASCII_DIGITS).decode("ascii")
            else:
                self._shape = _ANY_DIGIT.sub("0", self.text)
        return self._shape

    def dense(self) -> str:
        if self._dense is None:
            self._dense = self.shape().replace(" ", "").replace("-", "")
        return self._dense


_ASCII_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_ANY_DIGIT = re.compile(r"\d")

_Gate = Callable[[_View], bool]


def _has(*literals: str) -> _Gate:
    """Any literal in the text."""
    return lambda view: any(literal in view.text for literal in literals)


def _stems(*stems: str, also: re.Pattern[str] | None = None) -> _Gate:
    """Any stem in the fold, or ``also`` found in the fold."""

    def gate(view: _View) -> bool:
        folded = view.fold()
        return any(stem in folded for stem in stems) or (
            also is not None and also.search(folded) is not None
        )

    return gate


def _shaped(*layouts: str, dense: bool = False) -> _Gate:
    """Any digit layout in the shape (or the dense shape)."""
    if dense:
        return lambda view: any(layout in view.dense() for layout in layouts)
    return lambda view: any(layout in view.shape() for layout in layouts)


def _shape_search(pattern: str) -> _Gate:
    compiled = re.compile(pattern)
    return lambda view: compiled.search(view.shape()) is not None


def _text_search(pattern: str, literal: str) -> _Gate:
    compiled = re.compile(pattern)
    return lambda view: literal in view.text and compiled.search(view.text) is not None


_TOKEN_GATES: tuple[_Gate, ...] = (
    _has("-----BEGIN"),
    _has("sk-"),
    _has("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA"),
    _has("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _has("github_pat_"),
    _has("glpat-"),
    _has("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"),
    _has("AIza"),
    _has("_live_", "_test_"),
    _has("hf_"),
    _has("npm_"),
    _has("eyJ"),
    _has("earer "),
)
_URL_PASSWORD_GATE: _Gate = lambda view: "://" in view.text and "@" in view.text  # noqa: E731
# every secret key ends with one of these words; then come spaces and ':', '=', 'is' or 'was'
_ASSIGNMENT_GATE = _stems(
    also=re.compile(r"(?:pass|word|wd|phrase|code|pwd|pin|secret|key|token)\s*(?:[:=]|is|was)")
)
_IBAN_GATE = _shape_search(r"00(?<=[A-Z]{2}00)")  # two capitals, then the two check digits
_CARD_GATE = _shaped("0" * 13, dense=True)  # 13 digits, single spaces or dashes between
_NATIONAL_GATES: tuple[_Gate, ...] = (
    _shaped("000-00-0000"),  # US SSN
    _shape_search(r"000[ \-]000[ \-]000"),  # Canadian SIN
    _shape_search(r"00[A-Za-z]00[A-Za-z]000"),  # codice fiscale
    _shaped("00000000"),  # DNI: 8 digits
    _shaped("0000000"),  # NIE: 7 digits
    _shaped("00000000", dense=True),  # NIR: ends with 3 + 3 + 2 digits, spaces optional
    _text_search(r"756[. ]?\d{4}[. ]?\d{4}[. ]?\d{2}", "756"),  # Swiss AHV
    _shaped("0000 0000 0000"),  # Aadhaar
    _shaped("000.000.000-00"),  # CPF
    _shaped("00.00.00-000.00"),  # Belgian number
    _shape_search(r"000000[-+A]000"),  # HETU
    _shaped("000000-0000", "000000+0000"),  # personnummer
)
_ID_KEYWORD_GATE = _stems(
    "ssn", "social", "national", "nino", "passport", "tax", "personal", "driv", "bsn",
    "personnummer", "pesel", "steuer", "idnr", "aadhaar", "nhs", "medicare", "codice",
    "sozialversicherungsnummer", "cpr", "dselsnummer", "henkil",
    also=re.compile(r"id(?:entity)?\s+(?:card\s+)?(?:number|no)"),
)
_EMAIL_GATE = _has("@")
_PHONE_GATES: tuple[_Gate, ...] = (
    _shaped("+0"),  # '+' and a digit
    # the national pattern with its look-behind after the leading '0' (the same matches)
    _text_search(r"0(?<![\w.\-+/:]0)\d{1,4}(?:[ ./\-]?\(?\d{2,8}\)?){1,4}(?![\w.\-])", "0"),
    _shaped("000-0000", "000.0000"),  # ends with 3 digits, '.' or '-', 4 digits
    _stems("phone", "mobile", "cell", "tel", "whatsapp", "fax"),
)

# --------------------------------------------------------------------------- scanning


def _sub(
    pattern: re.Pattern[str],
    text: str,
    counts: Counter[str],
    kind: str,
    accept: Callable[[re.Match[str]], str | None],
) -> str:
    def replace(match: re.Match[str]) -> str:
        replacement = accept(match)
        if replacement is None:
            return match.group(0)
        counts[kind] += 1
        return replacement

    return pattern.sub(replace, text)


def _whole(kind: str, ok: Callable[[str], bool]) -> Callable[[re.Match[str]], str | None]:
    marker = redaction_marker(kind)

    def accept(match: re.Match[str]) -> str | None:
        try:
            return marker if ok(match.group(0)) else None
        except Exception:  # noqa: BLE001 - a validator that chokes is no hit
            return None

    return accept


def scan(text: str, *, own: OwnContacts | None = None) -> ScanResult:
    """Find and redact secrets, payment data, national ids and other people's contact data.

    Args:
        text: a profile body (or any text); the frontmatter should not be passed.
        own: the user's own e-mail addresses and phone numbers, left untouched.

    Returns:
        A :class:`ScanResult` with the redacted text and hits per kind.
    """
    return scan_with(text, own or OwnContacts(), gated=True)


def scan_with(text: str, own: OwnContacts, *, gated: bool) -> ScanResult:
    """:func:`scan`; ``gated=False`` runs every pattern whatever the pre-filters say (tests
    compare both)."""
    counts: Counter[str] = Counter()
    marker_secret = redaction_marker("secret")
    view = _View(text)

    def passes(gate: _Gate) -> bool:
        nonlocal view
        if not gated:
            return True
        if view.text is not text:
            view = _View(text)
        return gate(view)

    for pattern, gate in zip(_TOKEN_PATTERNS, _TOKEN_GATES, strict=True):
        if passes(gate):
            text = _sub(pattern, text, counts, "secret", lambda m: marker_secret)

    def url_password(match: re.Match[str]) -> str:
        whole = match.group(0)
        start = match.start(1) - match.start(0)
        end = match.end(1) - match.start(0)
        return whole[:start] + marker_secret + whole[end:]

    if passes(_URL_PASSWORD_GATE):
        text = _sub(_URL_PASSWORD, text, counts, "secret", url_password)
    if passes(_ASSIGNMENT_GATE):
        text = _sub(_ASSIGNMENT, text, counts, "secret", _assignment)

    if passes(_IBAN_GATE):
        text = _sub(_IBAN, text, counts, "iban", _whole("iban", std_iban.is_valid))
    if passes(_CARD_GATE):
        text = _sub(_CARD, text, counts, "card", _whole("card", _card_ok))
    for (pattern, validator), gate in zip(_NATIONAL_FORMATS, _NATIONAL_GATES, strict=True):
        if passes(gate):
            text = _sub(pattern, text, counts, "national_id", _whole("national_id", validator))
    if passes(_ID_KEYWORD_GATE):
        text = _sub(_ID_KEYWORD, text, counts, "national_id", _national_keyword)

    email_marker = redaction_marker("email")
    if passes(_EMAIL_GATE):
        text = _sub(
            _EMAIL, text, counts, "email",
            lambda m: None if own.is_own_email(m.group(0)) else email_marker,
        )

    phone_marker = redaction_marker("phone")
    for index, (pattern, gate) in enumerate(zip(_PHONE_PATTERNS, _PHONE_GATES, strict=True)):
        if not passes(gate):
            continue
        keyword_pattern = index == len(_PHONE_PATTERNS) - 1

        def accept_phone(match: re.Match[str], keyword_pattern: bool = keyword_pattern) -> str | None:
            value = match.group(match.lastindex or 0)
            if not _phone_ok(value) or own.is_own_phone(value):
                return None
            if not keyword_pattern and len(_digits(value)) < 9:
                return None
            whole = match.group(0)
            start = match.start(match.lastindex or 0) - match.start(0)
            end = match.end(match.lastindex or 0) - match.start(0)
            return whole[:start] + phone_marker + whole[end:]

        text = _sub(pattern, text, counts, "phone", accept_phone)

    return ScanResult(text=text, counts={k: counts[k] for k in KINDS if counts[k]})
