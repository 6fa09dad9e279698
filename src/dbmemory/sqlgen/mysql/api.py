"""The in-database API for MySQL 8 / MariaDB 10.6+: routines ``dbm_memory_<call>`` (``SQL
SECURITY DEFINER``), errors ``SIGNAL SQLSTATE '45000'`` with ``MYSQL_ERRNO`` 20701..20707 (see
:mod:`dbmemory.sqlgen.api`)."""

from __future__ import annotations

import re

from dbmemory.core.keys import SCOPES
from dbmemory.sqlgen.api_common import (
    ADMIN_CALLS,
    MARKER,
    RESERVED,
    SCOPE_LIST,
    TOOL_CALLS,
    USER_CALLS,
    protocol_parts,
)
from dbmemory.sqlgen.api_common import (
    MIRRORED as M,
)

# the calls, one module per part of the Python API they mirror
from dbmemory.sqlgen.mysql.agents import DISABLE, ENABLE
from dbmemory.sqlgen.mysql.expiry import EXPIRE
from dbmemory.sqlgen.mysql.files import CLEAR, DELETE, GET, LIST, PUT
from dbmemory.sqlgen.mysql.rules import (
    BIN,
    CAPS_AND_STORE_ROW,
    CHECK_ID,
    COMPONENT,
    FAIL,
    IDENTITY,
    NEED_TRX,
    PATH,
    RESERVED_CHECK,
    P,
    U,
    q,
)
from dbmemory.sqlgen.mysql.tool import TOOL

__all__ = [
    "mysql_statements",
    "mysql_script_body",
    "mysql_grants",
    "mysql_uninstall",
    "mysql_definer_setup",
    "mysql_definer_execute",
    "MYSQL_TABLES",
    "ROUTINES",
    "RETIRED",
]


def _resolve() -> str:
    def chk(value: str, what: str) -> str:
        return f"CALL {P}_check_component({value}, '{what}', p_scope);"

    return f"""CREATE FUNCTION {P}_store_key(
    p_scope TEXT {U}, p_agent_code TEXT {U}, p_user_id TEXT {U},
    p_session_id TEXT {U}, p_store_code TEXT {U}, p_context_key TEXT {U},
    p_context_value TEXT {U}) RETURNS VARCHAR(1000) {U}
    NO SQL SQL SECURITY DEFINER
BEGIN
    -- dbmemory.core.keys.build_store_key: every component checked, the reserved namespace unreachable
    DECLARE v_key VARCHAR(1000) {U};
    DECLARE v_what VARCHAR(300) {U};
    IF p_scope = '{RESERVED}' THEN
        CALL {P}_fail('invalid_scope', 'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent configuration can name it: pick one of {SCOPE_LIST}');
    END IF;
    IF p_scope IS NULL OR CAST(p_scope AS BINARY) NOT IN ({", ".join(f"CAST('{s}' AS BINARY)" for s in SCOPES)}) THEN
        CALL {P}_fail('invalid_scope', CONCAT('scope ', QUOTE(COALESCE(p_scope, 'NULL')), ' is not one of {SCOPE_LIST}: pick one of them'));
    END IF;
    CASE p_scope
        WHEN 'agent' THEN
            {chk("p_agent_code", "an agent code")}
            SET v_key = CONCAT('agent:', p_agent_code);
        WHEN 'user' THEN
            {chk("p_agent_code", "an agent code")}
            {chk("p_user_id", "a user id")}
            SET v_key = CONCAT('user:', p_agent_code, ':', p_user_id);
        WHEN 'session' THEN
            {chk("p_session_id", "a session id")}
            SET v_key = CONCAT('session:', p_session_id);
        WHEN 'shared' THEN
            {chk("p_store_code", "a store code")}
            SET v_key = CONCAT('shared:', p_store_code);
        WHEN 'global' THEN
            SET v_key = 'global';
        ELSE
            IF p_store_code IS NOT NULL THEN
                {chk("p_store_code", "a store code")}
                SET v_key = CONCAT('context:{MARKER}:', p_store_code);
            ELSE
                {chk("p_agent_code", "an agent code or a store code")}
                SET v_key = CONCAT('context:', p_agent_code);
            END IF;
            {chk("p_context_key", "a context key")}
            SET v_what = CONCAT('a context value for ', QUOTE(p_context_key));
            CALL {P}_check_component(p_context_value, v_what, p_scope);
            SET v_key = CONCAT(v_key, ':', p_context_key, ':', p_context_value);
    END CASE;
    RETURN v_key;
END"""


_KEY_PARAMS = (
    f"p_scope TEXT {U}, p_agent_code TEXT {U}, p_user_id TEXT {U},\n"
    f"    p_session_id TEXT {U}, p_store_code TEXT {U}, p_context_key TEXT {U},\n"
    f"    p_context_value TEXT {U}"
)


_KEY_CALL = (
    f"{P}_store_key(p_scope, p_agent_code, p_user_id, p_session_id, p_store_code,\n"
    "        p_context_key, p_context_value)"
)


_RESOLVE = f"""CREATE FUNCTION {P}resolve_store_id(
    {_KEY_PARAMS}) RETURNS BIGINT
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.resolve.resolve_store_id: build_store_key, then find_store_id
    DECLARE v_key VARCHAR(1000) {U} DEFAULT {_KEY_CALL};
    DECLARE v_id BIGINT;
    CALL {P}_check_identity(NULL, v_key);
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key {BIN};
    IF v_id IS NULL THEN
        CALL {P}_fail('not_found', CONCAT('store ', v_key, ' does not exist (it is created on its first write)'));
    END IF;
    RETURN v_id;
END"""


_OPEN_PARAMS = "IN " + _KEY_PARAMS.replace(", p_", ", IN p_").replace("\n    p_", "\n    IN p_")


_OPEN = f"""CREATE PROCEDURE {P}open_store(
    {_OPEN_PARAMS},
    OUT p_store_id BIGINT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.locks.get_or_create_store with a StoreRef without caps: the store id, the
    -- row created when missing with dbmemory.store.caps.creation_caps (the strictest enabled
    -- configurations that name the store, else the defaults); no audit event, as in Python
    DECLARE v_key VARCHAR(1000) {U} DEFAULT {_KEY_CALL};
    DECLARE v_fc INT;
    DECLARE v_nf INT;
    DECLARE v_sc BIGINT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    SET p_store_id = NULL;
    CALL {P}_check_identity(NULL, v_key);
    SELECT store_id INTO p_store_id FROM dbm_stores WHERE store_key = v_key {BIN};
    IF p_store_id IS NULL THEN
        CALL {P}_need_transaction();
        SELECT MIN(a.max_file_chars), MIN(a.max_files), MIN(a.max_store_chars)
          INTO v_fc, v_nf, v_sc
          FROM dbm_agents a
         WHERE a.memory_enabled = 1 AND a.scope_name = p_scope
           AND ((p_scope IN ('agent', 'user') AND a.agent_code = p_agent_code {BIN} AND a.store_code IS NULL)
                OR (p_scope = 'shared' AND a.store_code = p_store_code {BIN})
                OR p_scope = 'global'
                OR (p_scope = 'context' AND a.context_key = p_context_key {BIN}
                    AND ((p_store_code IS NULL AND a.store_code IS NULL AND a.agent_code = p_agent_code {BIN})
                         OR a.store_code = p_store_code {BIN})));
        -- a no-op update on a duplicate (dbmemory.db.dialect.writes.insert_store_statement)
        INSERT INTO dbm_stores
            (store_key, scope_name, agent_code, store_code, created_at, updated_at,
             max_file_chars, max_files, max_store_chars, file_count, total_chars)
        VALUES (v_key, p_scope,
                IF(p_scope IN ('agent', 'user', 'session')
                   OR (p_scope = 'context' AND p_store_code IS NULL), p_agent_code, NULL),
                IF(p_scope IN ('shared', 'context'), p_store_code, NULL),
                v_now, v_now, COALESCE(v_fc, {M["DEFAULT_MAX_FILE_CHARS"]}),
                COALESCE(v_nf, {M["DEFAULT_MAX_FILES"]}), v_sc, 0, 0)
        ON DUPLICATE KEY UPDATE store_id = store_id;
        SELECT store_id INTO p_store_id FROM dbm_stores WHERE store_key = v_key {BIN}
          LOCK IN SHARE MODE;
    END IF;
END"""


def _protocol_expr() -> str:
    """dbmemory.tool.protocol.get_memory_protocol as one expression of ASCII literals and code points."""
    lines = [
        f"CONCAT({', '.join(parts)})" if len(parts) > 1 else (parts[0] if parts else "''")
        for parts in protocol_parts(q, lambda c: f"CONVERT(CHAR({ord(c)} USING utf32) USING utf8mb4)")
    ]
    return "CONVERT(CONCAT_WS(CHAR(10),\n        " + ",\n        ".join(lines) + ") USING utf8mb4)"


_PROTOCOL = f"""CREATE FUNCTION {P}get_memory_protocol() RETURNS TEXT {U}
    DETERMINISTIC NO SQL SQL SECURITY DEFINER
    -- dbmemory.tool.protocol.get_memory_protocol(), character for character
    RETURN {_protocol_expr()}"""


_BODIES = [
    ("PROCEDURE", f"{P}_fail", FAIL),
    ("PROCEDURE", f"{P}_need_transaction", NEED_TRX),
    ("PROCEDURE", f"{P}_check_component", COMPONENT),
    ("PROCEDURE", f"{P}_check_path", PATH),
    ("PROCEDURE", f"{P}_check_store_id", CHECK_ID),
    ("PROCEDURE", f"{P}_check_identity", IDENTITY),
    ("PROCEDURE", f"{P}_refuse_reserved", RESERVED_CHECK[0]),
    ("PROCEDURE", f"{P}_check_reachable", RESERVED_CHECK[1]),
    ("PROCEDURE", f"{P}_check_caps", CAPS_AND_STORE_ROW[0]),
    ("PROCEDURE", f"{P}_store_row_update", CAPS_AND_STORE_ROW[1]),
    ("FUNCTION", f"{P}_store_key", _resolve()),
    ("FUNCTION", f"{P}resolve_store_id", _RESOLVE),
    ("PROCEDURE", f"{P}open_store", _OPEN),
    ("PROCEDURE", f"{P}list_files", LIST),
    ("FUNCTION", f"{P}get_file", GET),
    ("PROCEDURE", f"{P}put_file", PUT),
    ("PROCEDURE", f"{P}delete_file", DELETE),
    ("PROCEDURE", f"{P}clear_store_files", CLEAR),
    ("PROCEDURE", f"{P}enable_for_agent", ENABLE),
    ("PROCEDURE", f"{P}disable_for_agent", DISABLE),
    ("PROCEDURE", f"{P}expire_files", EXPIRE),
    ("FUNCTION", f"{P}get_memory_protocol", _PROTOCOL),
    *TOOL,
]


ROUTINES: tuple[tuple[str, str], ...] = tuple((kind, name) for kind, name, _ in _BODIES)
"""``(PROCEDURE|FUNCTION, name)`` of every routine, helpers (``dbm_memory__*``) first."""


MYSQL_TABLES: tuple[str, ...] = tuple(sorted(
    set(re.findall(r"\b(dbm_(?!memory)[a-z_]+)\b", "\n".join(body for _, _, body in _BODIES)))
))
"""The tables the routines read and write: the definer account's DML rights."""


RETIRED: tuple[tuple[str, str], ...] = (("FUNCTION", f"{P}_unbound"),)
"""``(PROCEDURE|FUNCTION, name)`` of routines earlier versions installed and this one does not:
installing and uninstalling drop them (``{P}_unbound`` exempted logins from the binding to their
stores by the user name the client sent)."""


def mysql_statements(definer: str | None = None) -> list[str]:
    """The statements that (re)create the routines, for a driver, in order (the
    :data:`RETIRED` ones dropped first).

    ``definer``: an account (``'name'@'host'``, already quoted) every routine runs as
    (``CREATE DEFINER = ...``); None: the installing account (MySQL's default).
    """
    out: list[str] = [f"DROP {kind} IF EXISTS {name}" for kind, name in RETIRED]
    for kind, name, body in _BODIES:
        if definer is not None:
            body = body.replace("CREATE ", f"CREATE DEFINER = {definer} ", 1)
        out += [f"DROP {kind} IF EXISTS {name}", body]
    return out


def mysql_definer_setup(account: str, database: str) -> list[str]:
    """Create the locked definer ``account`` (``'name'@'host'``) when missing, with SELECT,
    INSERT, UPDATE, DELETE on :data:`MYSQL_TABLES` of ``database`` and CREATE TEMPORARY TABLES
    there (``expire_files`` keeps its batch in session-private temporary tables), nothing else.
    """
    schema = "`" + database.replace("`", "``") + "`"
    return [
        f"CREATE USER IF NOT EXISTS {account} ACCOUNT LOCK",
        f"ALTER USER {account} ACCOUNT LOCK",
        *(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {schema}.{table} TO {account}"
          for table in MYSQL_TABLES),
        f"GRANT CREATE TEMPORARY TABLES ON {schema}.* TO {account}",
    ]


def mysql_definer_execute(account: str) -> list[str]:
    """EXECUTE on every routine for the definer (the routines call one another as it)."""
    return [f"GRANT EXECUTE ON {kind} {name} TO {account}" for kind, name, _ in _BODIES]


def mysql_script_body() -> str:
    """The routines for the mysql client (``DELIMITER //``)."""
    drops = "\n".join(f"DROP {kind} IF EXISTS {name};"
                      for kind, name in (*RETIRED, *((k, n) for k, n, _ in _BODIES)))
    bodies = "\n\n".join(body + "//" for _, _, body in _BODIES)
    return f"{drops}\n\nDELIMITER //\n{bodies}\nDELIMITER ;\n"


def mysql_grants(role: str | None, admin_role: str | None = None) -> list[str]:
    """Create ``role`` (the user role) and ``admin_role`` when given and missing, and grant them
    EXECUTE on :data:`USER_CALLS` / :data:`ADMIN_CALLS` only."""
    out: list[str] = []
    for name, calls in ((role, (*USER_CALLS, *TOOL_CALLS)), (admin_role, ADMIN_CALLS)):
        if name is None:
            continue
        public = {f"{P}{call}" for call in calls}
        out.append(f"CREATE ROLE IF NOT EXISTS {name}")
        out += [f"GRANT EXECUTE ON {kind} {routine} TO {name}"
                for kind, routine, _ in _BODIES if routine in public]
    return out


def mysql_uninstall() -> list[str]:
    """Drop every routine of the API (and the :data:`RETIRED` ones)."""
    return [f"DROP {kind} IF EXISTS {name}" for kind, name, _ in reversed(_BODIES)] + [
        f"DROP {kind} IF EXISTS {name}" for kind, name in RETIRED]
