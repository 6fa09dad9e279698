"""What the three renderings of the in-database API (``sql/<dialect>/api.sql``) share: the
names of the calls, the error codes, the path subset the procedures accept, and the constants
of the Python API they mirror.

Every template names the Python constant or function it mirrors; the values are imported from
there, so a change to the Python rule changes the rendered SQL (and the drift check fails until
``python -m dbmemory.sqlgen`` is run again).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from dbmemory.core.checks import INT32_MAX, INT64_MAX
from dbmemory.core.keys import MAX_COMPONENT_CHARS, RESERVED_SCOPE, SCOPES, STORE_CODE_MARKER
from dbmemory.core.model import DEFAULT_MAX_FILE_CHARS, DEFAULT_MAX_FILES
from dbmemory.core.paths import MAX_PATH_CHARS, ROOT
from dbmemory.errors import (
    CapExceededError,
    ConflictError,
    DbMemoryError,
    InvalidArgumentError,
    InvalidPathError,
    InvalidScopeError,
    NotFoundError,
)
from dbmemory.store.expiry import MAX_EXPIRY_DAYS, MIN_EXPIRY_DAYS
from dbmemory.store.touches import TOUCH_INTERVAL
from dbmemory.tool.protocol import get_memory_protocol

__all__ = [
    "derived_role_base",
    "ROLE_BASE_SQL",
    "OWNER_SUFFIX",
    "API_NAME",
    "USER_SUFFIX",
    "ADMIN_SUFFIX",
    "DERIVED",
    "ADMIN_CALLS",
    "USER_CALLS",
    "API_CALLS",
    "TOOL_CALLS",
    "ApiError",
    "API_ERRORS",
    "ERROR_BY_CODE",
    "sql_path_problem",
    "ADMIN_ACTOR",
    "EXPIRY_API_ACTOR",
    "MAX_ACTOR_CHARS",
    "MAX_DETAIL_CHARS",
    "PATH_RULE",
    "MIRRORED",
    "SCOPE_LIST",
    "RESERVED",
    "MARKER",
    "RESERVED_PREFIX",
    "RESERVED_STORE_RULE",
    "COMPONENT_RULE",
    "DAYS_RULE",
    "protocol_parts",
    "own_store_condition",
]

API_NAME = "dbm_memory"
"""Oracle package, PostgreSQL schema, and prefix of the MySQL/MariaDB routines
(``dbm_memory_<call>``)."""

USER_SUFFIX = "_user"
ADMIN_SUFFIX = "_admin"
"""The default roles are ``<base>_user`` (the file calls) and ``<base>_admin`` (the
configuration calls), :func:`derived_role_base` of the database: two databases on one server
never share them."""

DERIVED = "-"
"""A role name that stands for the derived default (``<base>_user`` / ``<base>_admin``)."""

ROLE_PREFIX_CHARS = 15
"""Characters of the database (or schema) name kept in the derived role names."""


def derived_role_base(database: str) -> str:
    """The stem of the roles the installer names for one database: ``dbm_`` + the database name
    with every character other than ``A-Z a-z 0-9 _`` replaced by ``_``, lower-cased, cut at
    :data:`ROLE_PREFIX_CHARS` characters, ``_`` + the first 4 hex digits of the MD5 of the name's
    UTF-8 bytes (two databases whose names share a prefix get different roles). At most 24
    characters, so ``<base>_owner`` / ``_admin`` fit Oracle's 30. :data:`ROLE_BASE_SQL` is the
    same rule in SQL."""
    clean = re.sub(r"[^A-Za-z0-9_]", "_", database).lower()[:ROLE_PREFIX_CHARS]
    return f"dbm_{clean}_{hashlib.md5(database.encode('utf-8')).hexdigest()[:4]}"


ROLE_BASE_SQL = (
    "'dbm_' || pg_catalog.left(pg_catalog.lower(pg_catalog.regexp_replace("
    "pg_catalog.current_database(), '[^A-Za-z0-9_]', '_', 'g')), "
    f"{ROLE_PREFIX_CHARS}) || '_' || pg_catalog.left(pg_catalog.md5(pg_catalog.current_database()), 4)"
)
"""PostgreSQL expression of :func:`derived_role_base` for the current database."""

OWNER_SUFFIX = "_owner"
"""``<base>_owner``: the NOLOGIN role that owns the API (PostgreSQL) and holds only DML on
dbmemory's tables."""

API_CALLS: tuple[str, ...] = (
    "resolve_store_id",
    "open_store",
    "list_files",
    "get_file",
    "put_file",
    "delete_file",
    "clear_store_files",
    "enable_for_agent",
    "disable_for_agent",
    "expire_files",
    "get_memory_protocol",
)
"""The public calls, in the order the scripts define them."""

TOOL_CALLS: tuple[str, ...] = ("run_command",)
"""The MEMORY tool in SQL (a call of the user role): PostgreSQL and MySQL/MariaDB (run and
compared with Python there); Oracle has none yet."""

ADMIN_CALLS: tuple[str, ...] = ("enable_for_agent", "disable_for_agent", "expire_files")
"""The calls of the admin role: agent configuration, caps, dropping stores, expiry."""

USER_CALLS: tuple[str, ...] = tuple(c for c in API_CALLS if c not in ADMIN_CALLS)
"""The calls of the user role: the file calls and the store lookups."""

ADMIN_ACTOR = "admin"
"""``actor_name`` of the audit events when the caller passes none: the default ``actor`` of
:func:`dbmemory.store.files.put_file`, :func:`~dbmemory.store.moves.delete_file` and
:func:`~dbmemory.store.moves.clear_store_files`, and the actor of :func:`dbmemory.enable_for_agent`
and :func:`dbmemory.disable_for_agent`."""

EXPIRY_API_ACTOR = "expiry"
"""``actor_name`` of the events of :func:`dbmemory.store.expiry.expire_files` (``_expire_batch``),
which ``expire_files`` of the API mirrors (the scheduled job signs ``expiry-job``)."""

MAX_ACTOR_CHARS = 500
"""``dbm_audit_events.actor_name`` length (:func:`dbmemory.store.audit._audit_rows` cuts there)."""

MAX_DETAIL_CHARS = 1000
"""``dbm_audit_events.detail_text`` length (:func:`dbmemory.store.audit._audit_rows` cuts there)."""


@dataclass(frozen=True)
class ApiError:
    """One error of the in-database API.

    Attributes:
        name: the code (``not_found`` ...): Oracle exception ``e_<name>``, PostgreSQL and MySQL
            message prefix.
        number: Oracle ``raise_application_error`` code is ``-number``; MySQL/MariaDB
            ``MYSQL_ERRNO`` is ``number`` (``SQLSTATE '45000'``).
        sqlstate: PostgreSQL ``SQLSTATE``.
        python: the exception class the Python API raises for the same input.
        meaning: one line for the error table of docs/sql.md.
    """

    name: str
    number: int
    sqlstate: str
    python: type[DbMemoryError]
    meaning: str


API_ERRORS: tuple[ApiError, ...] = (
    ApiError("not_found", 20701, "MD701", NotFoundError,
             "the store, file or agent configuration does not exist"),
    ApiError("missing_context_key", 20702, "MD702", InvalidScopeError,
             "a store-key component the scope needs is missing (the context key or value, "
             "an agent code, user id, session id or store code)"),
    ApiError("invalid_argument", 20703, "MD703", InvalidArgumentError,
             "an argument breaks a rule (NULL or NUL text, a store id or cap that is not a "
             "positive whole number, expiry days out of range, a snapshot isolation level for "
             "expire_files)"),
    ApiError("invalid_path", 20704, "MD704", InvalidPathError,
             "the path is not one the SQL API accepts (see Paths), is the root, is a "
             "directory, or has a file as parent"),
    ApiError("cap_exceeded", 20705, "MD705", CapExceededError,
             "the write would break max_file_chars, max_files or max_store_chars"),
    ApiError("conflict", 20706, "MD706", ConflictError,
             "open_store cannot see a store another transaction created after this one's "
             "snapshot (REPEATABLE READ, SERIALIZABLE), or another transaction configured the "
             "same agent at the same time: roll back and retry"),
    ApiError("invalid_scope", 20707, "MD707", InvalidScopeError,
             "unknown scope, the reserved namespace (by scope, or by the id of a reserved store), or an "
             "invalid key component"),
)
"""The documented errors, one range: Oracle ``-20701`` .. ``-20707``, MySQL ``MYSQL_ERRNO``
20701 .. 20707, PostgreSQL ``SQLSTATE`` ``MD701`` .. ``MD707`` (class ``MD``: the SQL standard leaves classes starting with I-Z or 5-9 to implementations, and PostgreSQL uses none of them but ``P0`` and ``XX``)."""

ERROR_BY_CODE = {e.name: e for e in API_ERRORS}


# -- the path subset ---------------------------------------------------------------------------

PATH_RULE = (
    f"the SQL API accepts {ROOT} and paths {ROOT}/<segment>/... of at most {MAX_PATH_CHARS} "
    "printable ASCII characters (U+0020..U+007E) without '\\' and '%', whose segments are "
    "not empty, not '.' or '..', and neither start nor end with a space"
)
"""The documented strict subset of canonical paths (:func:`dbmemory.core.paths.normalize_path`
returns every one of them unchanged); every database checks it character by character on
code points, with no collation involved."""

_CODE_BACKSLASH, _CODE_PERCENT, _CODE_SLASH, _CODE_DOT, _CODE_SPACE = 92, 37, 47, 46, 32


def sql_path_problem(path: object) -> str | None:
    """The path check of the procedures, in Python (the same steps as the rendered SQL).

    Returns:
        ``None`` when the procedures accept ``path``, else why not. Every accepted path is
        canonical: ``normalize_path(path) == path`` (a property test checks it).
    """
    if path is None:
        return "path is NULL"
    if not isinstance(path, str) or path == "":
        return "path is empty"
    if len(path) > MAX_PATH_CHARS:
        return "too long"
    for char in path:
        code = ord(char)
        if code < 32 or code > 126:
            return "not printable ASCII"
        if code in (_CODE_BACKSLASH, _CODE_PERCENT):
            return "backslash or percent"
    if path == ROOT:
        return None
    if not path.startswith(ROOT + "/"):
        return "outside the root"
    for segment in path[len(ROOT) + 1 :].split("/"):
        if segment == "":
            return "empty segment"
        if segment in (".", ".."):
            return "dot segment"
        if segment[0] == " " or segment[-1] == " ":
            return "surrounding space"
    return None


# Mirrored constants (each template names the one it uses).
MIRRORED = {
    "MAX_COMPONENT_CHARS": MAX_COMPONENT_CHARS,
    "MAX_PATH_CHARS": MAX_PATH_CHARS,
    "DEFAULT_MAX_FILE_CHARS": DEFAULT_MAX_FILE_CHARS,
    "DEFAULT_MAX_FILES": DEFAULT_MAX_FILES,
    "INT32_MAX": INT32_MAX,
    "INT64_MAX": INT64_MAX,
    "MIN_EXPIRY_DAYS": MIN_EXPIRY_DAYS,
    "MAX_EXPIRY_DAYS": MAX_EXPIRY_DAYS,
    "TOUCH_INTERVAL_S": int(TOUCH_INTERVAL.total_seconds()),
}

SCOPE_LIST = ", ".join(SCOPES)
RESERVED = RESERVED_SCOPE
MARKER = STORE_CODE_MARKER

RESERVED_PREFIX = RESERVED_SCOPE + ":"
"""The prefix of every key in the reserved namespace (:func:`dbmemory.core.keys.is_reserved_key`):
every call that takes a store id refuses a store whose key starts with it (``invalid_scope``),
so the API role reaches no user profile, memory-items store or organisation memory by id."""

RESERVED_STORE_RULE = (
    "is in the reserved namespace, which the SQL API cannot reach: dbmemory owns those stores "
    "(user profiles, memory items, organisation memory) and writes them only through its "
    "Python API; pass the id of a store open_store or resolve_store_id returned"
)
"""Message after ``store <id> `` of that refusal (no store key, no user id: the caller may be
probing ids)."""

COMPONENT_RULE = "may contain only ASCII letters, digits, '_', '.' and '-'"
"""Message part of :func:`dbmemory.core.keys.validate_component`."""

DAYS_RULE = (
    f"days must be a number of at least {MIN_EXPIRY_DAYS:.6g} (1 hour, the touch interval: "
    "reads are recorded at most once an hour)"
)
"""Message of :func:`dbmemory.store.expiry.validate_days`."""


def protocol_lines() -> list[str]:
    """The lines of :func:`dbmemory.tool.protocol.get_memory_protocol` (rendered chunk by chunk)."""
    return get_memory_protocol().split("\n")


def protocol_parts(quote: Callable[[str], str], code_point: Callable[[str], str]) -> list[list[str]]:
    """The MEMORY PROTOCOL (:func:`protocol_lines`) as SQL pieces, one list per line: each ASCII
    run as ``quote(run)``, each other character as ``code_point(char)`` (the scripts stay pure
    ASCII); an empty line is an empty list. Each backend joins the pieces its own way."""
    lines = []
    for line in protocol_lines():
        parts = []
        for is_ascii, run in split_ascii(line):
            if is_ascii:
                parts.append(quote(run))
            else:
                parts.extend(code_point(c) for c in run)
        lines.append(parts)
    return lines


OWN_KEY_PREFIXES: tuple[tuple[str, int], ...] = (("user:", 2), ("context:", 3))
"""The agent-keyed store keys besides ``agent:<A>`` that :func:`dbmemory.store.drop.own_store_ids`
counts as the agent's own, with the number of ``:`` in such a key: ``user:<A>:<U>`` and
``context:<A>:<K>:<V>`` (a store-code key ``context:store:<C>:<K>:<V>`` has 4)."""


def own_store_condition(
    key_is: Callable[[str], str],
    starts_with: Callable[[str, int], str],
    colons: Callable[[int], str],
) -> str:
    """The SQL condition on ``dbm_stores s`` that picks the stores ``p_agent_code`` owns, by
    exact key (:func:`dbmemory.store.drop.own_store_ids`), from the backend's three fragments:
    ``key_is(prefix)`` (``s.store_key`` equals ``prefix`` + the agent code),
    ``starts_with(prefix, n)`` (the first ``n`` + agent-code-length characters of the key are
    ``prefix`` + the agent code + ``:``) and ``colons(k)`` (the key has ``k`` colons)."""
    alternatives = [key_is("agent:")] + [
        f"({starts_with(prefix, len(prefix) + 1)}\n            AND {colons(count)})"
        for prefix, count in OWN_KEY_PREFIXES
    ]
    return "(" + "\n        OR ".join(alternatives) + ")"


def split_ascii(line: str) -> list[tuple[bool, str]]:
    """``line`` as runs of ``(is_ascii, text)``, so a script can spell the non-ASCII
    characters as code points and stay pure ASCII (no client character-set surprises)."""
    runs: list[tuple[bool, str]] = []
    for char in line:
        kind = char.isascii()
        if runs and runs[-1][0] == kind:
            runs[-1] = (kind, runs[-1][1] + char)
        else:
            runs.append((kind, char))
    return runs
