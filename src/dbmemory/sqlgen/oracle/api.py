"""The in-database API for Oracle 19c+: package ``dbm_memory`` (definer rights), errors
``raise_application_error`` -20701 .. -20707 with named exceptions (see
:mod:`dbmemory.sqlgen.api`). Rendered and reviewed, not yet run on a live Oracle server."""

from __future__ import annotations

import re

from dbmemory.core.keys import SCOPES
from dbmemory.sqlgen.api_common import (
    ADMIN_ACTOR,
    API_ERRORS,
    API_NAME,
    MARKER,
    RESERVED,
    SCOPE_LIST,
)
from dbmemory.sqlgen.api_common import (
    MIRRORED as M,
)

# the package body: its private part, then the calls, one module per part of the Python API
# they mirror
from dbmemory.sqlgen.oracle.agents import AGENTS
from dbmemory.sqlgen.oracle.expiry import EXPIRY
from dbmemory.sqlgen.oracle.files import FILES
from dbmemory.sqlgen.oracle.reference import REFERENCE_BODY, REFERENCE_SPEC
from dbmemory.sqlgen.oracle.rules import BODY_RULES, protocol_expr

__all__ = ["oracle_statements", "oracle_script_body", "oracle_grants", "oracle_uninstall"]

S = API_NAME


def _scope_constants() -> str:
    return "\n".join(f"  c_scope_{s:<8} CONSTANT VARCHAR2(10) := '{s}';" for s in SCOPES)


def _exceptions() -> str:
    lines = []
    for e in API_ERRORS:
        lines.append(f"  e_{e.name} EXCEPTION;  -- {e.meaning[:70]}")
        lines.append(f"  PRAGMA EXCEPTION_INIT(e_{e.name}, -{e.number});")
    return "\n".join(lines)


_SPEC = f"""CREATE OR REPLACE PACKAGE {S} AUTHID DEFINER AS
  -- dbmemory's memory API: the rules of the Python API (dbmemory.store.files, dbmemory.store.agents,
  -- dbmemory.store.expiry); every call joins the caller's transaction, none commits.
  -- Scopes (dbmemory.core.keys.SCOPES)
{_scope_constants()}
  -- Errors (dbmemory.sqlgen.api_common.API_ERRORS); the message starts with the code
{_exceptions()}

  TYPE t_file_info IS RECORD (
    path             VARCHAR2(1000 CHAR),
    chars            NUMBER,
    version          NUMBER,
    created_at       TIMESTAMP(6),
    updated_at       TIMESTAMP(6),
    last_accessed_at TIMESTAMP(6)
  );
  TYPE t_file_infos IS TABLE OF t_file_info;

  FUNCTION resolve_store_id_n (
    p_scope         IN VARCHAR2,
    p_agent_code    IN VARCHAR2 DEFAULT NULL,
    p_user_id       IN VARCHAR2 DEFAULT NULL,
    p_session_id    IN VARCHAR2 DEFAULT NULL,
    p_store_code    IN VARCHAR2 DEFAULT NULL,
    p_context_key   IN VARCHAR2 DEFAULT NULL,
    p_context_value IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER;
  -- the store id, its row created when missing (writes: call it from PL/SQL)
  FUNCTION open_store (
    p_scope         IN VARCHAR2,
    p_agent_code    IN VARCHAR2 DEFAULT NULL,
    p_user_id       IN VARCHAR2 DEFAULT NULL,
    p_session_id    IN VARCHAR2 DEFAULT NULL,
    p_store_code    IN VARCHAR2 DEFAULT NULL,
    p_context_key   IN VARCHAR2 DEFAULT NULL,
    p_context_value IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER;
  -- SELECT * FROM dbm_memory.list_files(:store_id): sorted by path (code-point order)
  FUNCTION list_files (p_store_id IN NUMBER) RETURN t_file_infos PIPELINED;
  FUNCTION get_file (p_store_id IN NUMBER, p_path IN VARCHAR2) RETURN CLOB;
  -- dbmemory's own calls: the *_n writers are functions (called from PL/SQL, not from SQL)
  -- that return a result; the reference procedures of the same names are below
  FUNCTION put_file_n (p_store_id IN NUMBER, p_path IN VARCHAR2, p_text IN CLOB,
                     p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER;
  FUNCTION delete_file_n (p_store_id IN NUMBER, p_path IN VARCHAR2,
                        p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER;
  FUNCTION clear_store_files_n (p_store_id IN NUMBER,
                              p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER;
  FUNCTION enable_for_agent_n (
    p_agent_code      IN VARCHAR2,
    p_scope           IN VARCHAR2 DEFAULT c_scope_agent,
    p_store_code      IN VARCHAR2 DEFAULT NULL,
    p_context_key     IN VARCHAR2 DEFAULT NULL,
    p_max_file_chars  IN NUMBER DEFAULT NULL,
    p_max_files       IN NUMBER DEFAULT NULL,
    p_max_store_chars IN NUMBER DEFAULT NULL
  ) RETURN NUMBER;
  FUNCTION disable_for_agent_n (p_agent_code IN VARCHAR2, p_drop_store IN NUMBER DEFAULT 0)
    RETURN NUMBER;
  FUNCTION expire_files_n (p_days IN NUMBER, p_store_id IN NUMBER DEFAULT NULL) RETURN NUMBER;
  FUNCTION get_memory_protocol RETURN CLOB;
  -- the user this session's requests serve (package state, this session only): a user-scope
  -- store is reachable only when it names this user; call it at the start of every request
  PROCEDURE set_user (p_user_id IN VARCHAR2);
  PROCEDURE clear_user;
  FUNCTION current_user_id RETURN VARCHAR2;
{REFERENCE_SPEC}
END {S};"""


_BODY = (
    BODY_RULES
    + "\n"
    + f"""  FUNCTION store_key (
    p_scope IN VARCHAR2, p_agent_code IN VARCHAR2, p_user_id IN VARCHAR2,
    p_session_id IN VARCHAR2, p_store_code IN VARCHAR2,
    p_context_key IN VARCHAR2, p_context_value IN VARCHAR2
  ) RETURN VARCHAR2 IS
    -- dbmemory.core.keys.build_store_key: every component checked, the reserved namespace unreachable
    v_key VARCHAR2(700 CHAR);
  BEGIN
    IF same(p_scope, '{RESERVED}') THEN
      fail('invalid_scope', 'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent configuration can name it: pick one of {SCOPE_LIST}');
    END IF;
    IF same(p_scope, c_scope_agent) THEN
      v_key := 'agent:' || component(p_agent_code, 'an agent code', p_scope);
    ELSIF same(p_scope, c_scope_user) THEN
      v_key := 'user:' || component(p_agent_code, 'an agent code', p_scope)
        || ':' || component(p_user_id, 'a user id', p_scope);
    ELSIF same(p_scope, c_scope_session) THEN
      v_key := 'session:' || component(p_session_id, 'a session id', p_scope);
    ELSIF same(p_scope, c_scope_shared) THEN
      v_key := 'shared:' || component(p_store_code, 'a store code', p_scope);
    ELSIF same(p_scope, c_scope_global) THEN
      v_key := 'global';
    ELSIF same(p_scope, c_scope_context) THEN
      IF p_store_code IS NOT NULL THEN
        v_key := 'context:{MARKER}:' || component(p_store_code, 'a store code', p_scope);
      ELSE
        v_key := 'context:' || component(p_agent_code, 'an agent code or a store code', p_scope);
      END IF;
      v_key := v_key || ':' || component(p_context_key, 'a context key', p_scope)
        || ':' || component(p_context_value, 'a context value for ''' || p_context_key || '''', p_scope);
    ELSE
      fail('invalid_scope', 'scope ''' || p_scope || ''' is not one of {SCOPE_LIST}: pick one of them');
    END IF;
    RETURN v_key;
  END store_key;

  FUNCTION resolve_store_id_n (
    p_scope IN VARCHAR2, p_agent_code IN VARCHAR2 DEFAULT NULL, p_user_id IN VARCHAR2 DEFAULT NULL,
    p_session_id IN VARCHAR2 DEFAULT NULL, p_store_code IN VARCHAR2 DEFAULT NULL,
    p_context_key IN VARCHAR2 DEFAULT NULL, p_context_value IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER IS
    -- dbmemory.store.resolve.resolve_store_id: build_store_key, then find_store_id
    v_key VARCHAR2(700 CHAR) := store_key(p_scope, p_agent_code, p_user_id, p_session_id,
                                          p_store_code, p_context_key, p_context_value);
    v_id  NUMBER;
  BEGIN
    check_identity(NULL, v_key);
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key;
    RETURN v_id;
  EXCEPTION
    WHEN NO_DATA_FOUND THEN
      fail('not_found', 'store ' || v_key || ' does not exist (it is created on its first write)');
  END resolve_store_id_n;

  FUNCTION open_store (
    p_scope IN VARCHAR2, p_agent_code IN VARCHAR2 DEFAULT NULL, p_user_id IN VARCHAR2 DEFAULT NULL,
    p_session_id IN VARCHAR2 DEFAULT NULL, p_store_code IN VARCHAR2 DEFAULT NULL,
    p_context_key IN VARCHAR2 DEFAULT NULL, p_context_value IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER IS
    -- dbmemory.store.locks.get_or_create_store with a StoreRef without caps: the store id, the
    -- row created when missing with dbmemory.store.caps.creation_caps (the strictest enabled
    -- configurations that name the store, else the defaults); no audit event, as in Python
    v_key VARCHAR2(700 CHAR) := store_key(p_scope, p_agent_code, p_user_id, p_session_id,
                                          p_store_code, p_context_key, p_context_value);
    v_id  NUMBER;
    v_fc  NUMBER;
    v_nf  NUMBER;
    v_sc  NUMBER;
    v_now TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  BEGIN
    check_identity(NULL, v_key);
    BEGIN
      SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key;
      RETURN v_id;
    EXCEPTION
      WHEN NO_DATA_FOUND THEN NULL;
    END;
    SELECT MIN(a.max_file_chars), MIN(a.max_files), MIN(a.max_store_chars)
      INTO v_fc, v_nf, v_sc
      FROM dbm_agents a
     WHERE a.memory_enabled = 1 AND a.scope_name = p_scope
       AND ((p_scope IN (c_scope_agent, c_scope_user) AND a.agent_code = p_agent_code AND a.store_code IS NULL)
            OR (p_scope = c_scope_shared AND a.store_code = p_store_code)
            OR p_scope = c_scope_global
            OR (p_scope = c_scope_context AND a.context_key = p_context_key
                AND ((p_store_code IS NULL AND a.store_code IS NULL AND a.agent_code = p_agent_code)
                     OR a.store_code = p_store_code)));
    BEGIN
      INSERT INTO dbm_stores
        (store_key, scope_name, agent_code, store_code, created_at, updated_at,
         max_file_chars, max_files, max_store_chars, file_count, total_chars)
      VALUES (v_key, p_scope,
              CASE WHEN p_scope IN (c_scope_agent, c_scope_user, c_scope_session)
                        OR (p_scope = c_scope_context AND p_store_code IS NULL) THEN p_agent_code END,
              CASE WHEN p_scope IN (c_scope_shared, c_scope_context) THEN p_store_code END,
              v_now, v_now, NVL(v_fc, {M["DEFAULT_MAX_FILE_CHARS"]}), NVL(v_nf, {M["DEFAULT_MAX_FILES"]}), v_sc, 0, 0);
    EXCEPTION
      WHEN DUP_VAL_ON_INDEX THEN NULL;  -- created concurrently: use theirs
    END;
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key;
    RETURN v_id;
  EXCEPTION
    WHEN NO_DATA_FOUND THEN
      fail('conflict', 'store ' || v_key || ' was created by a transaction this one cannot see (SERIALIZABLE): roll back and retry');
  END open_store;

"""
    + FILES
    + AGENTS
    + EXPIRY
    + f"""  FUNCTION get_memory_protocol RETURN CLOB IS
  BEGIN
    -- dbmemory.tool.protocol.get_memory_protocol(), character for character
    RETURN TO_CLOB({protocol_expr()});
  END get_memory_protocol;

  PROCEDURE set_user (p_user_id IN VARCHAR2) IS
  BEGIN
    g_user_id := component(p_user_id, 'a user id', c_scope_user);
  END set_user;

  PROCEDURE clear_user IS
  BEGIN
    g_user_id := NULL;
  END clear_user;

  FUNCTION current_user_id RETURN VARCHAR2 IS
  BEGIN
    RETURN g_user_id;
  END current_user_id;

"""
    + REFERENCE_BODY
    + f"""END {S};"""
)


# the package state, declared before the first subprogram body (PL/SQL refuses an item
# declared after one, PLS-00103)
_BODY = _BODY.replace(
    f"PACKAGE BODY {S} AS\n",
    f"PACKAGE BODY {S} AS\n  g_store_code VARCHAR2(200 CHAR);  -- set_store / clear_store: this session's store code\n"
    "  g_user_id VARCHAR2(200 CHAR);  -- set_user / clear_user: the user this session's requests serve\n",
    1,
)

# SQL*Plus ends a block at a blank line unless SQLBLANKLINES is on: the package has none
_SPEC = "\n".join(line for line in _SPEC.splitlines() if line.strip())
_BODY = "\n".join(line for line in _BODY.splitlines() if line.strip())

_KEY_EQUALITY = re.compile(
    r"(\b(?:WHERE|AND|OR) \(*|\()"
    r"((?:\b[a-z]\.)?(?:store_key|agent_code|store_code|context_key|scope_name)\b"
    r"|SUBSTR\([a-z]\.store_key, 1, LENGTH\([a-z_]+\)(?: \+ \d+)?\))"
    r" = ((?:'[^']*' \|\| )?[a-z_]+(?: \|\| ':')?)"
)


def binary_key_comparisons(body: str) -> str:
    """Every SQL comparison of a key column (store key, agent code, store code, context key,
    scope) also compared byte for byte: ``(x = y AND UTL_RAW.CAST_TO_RAW(x) =
    UTL_RAW.CAST_TO_RAW(y))``. Under ``NLS_COMP = LINGUISTIC`` (APEX's case-insensitive
    setting) ``=`` follows ``NLS_SORT`` and ``user:SUPPORT:alice`` would find ALICE's store; RAW
    values compare in binary whatever the session's NLS settings, and the plain ``=`` keeps the
    unique index usable when the session compares in binary. Keys are ASCII (the component rule)
    and at most 1,000 characters, within SQL's 2,000-byte RAW."""
    return _KEY_EQUALITY.sub(
        lambda m: (f"{m.group(1)}({m.group(2)} = {m.group(3)} AND UTL_RAW.CAST_TO_RAW({m.group(2)})"
                   f" = UTL_RAW.CAST_TO_RAW({m.group(3)}))"),
        body,
    )


_BODY = binary_key_comparisons(_BODY)


def oracle_statements() -> list[str]:
    """The package spec and body, for a driver (no ``/``)."""
    return [_SPEC, _BODY]


def oracle_grants(role: str) -> list[str]:
    """Create ``role`` when missing (needs CREATE ROLE) and grant it EXECUTE on the package."""
    return [
        f"""BEGIN
  EXECUTE IMMEDIATE 'CREATE ROLE {role}';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE <> -1921 THEN  -- ORA-01921: the role exists
      RAISE;
    END IF;
END;""",
        f"GRANT EXECUTE ON {S} TO {role}",
    ]


def oracle_uninstall() -> list[str]:
    """Drop the package (when it exists)."""
    return [
        f"""BEGIN
  EXECUTE IMMEDIATE 'DROP PACKAGE {S}';
EXCEPTION
  WHEN OTHERS THEN
    IF SQLCODE <> -4043 THEN  -- ORA-04043: it does not exist
      RAISE;
    END IF;
END;"""
    ]


def oracle_script_body() -> str:
    """The package for SQL*Plus / SQLcl, with a compile check and the role grant."""
    return f"""WHENEVER SQLERROR EXIT SQL.SQLCODE
SET DEFINE OFF
SET SQLBLANKLINES ON

{_SPEC}
/

{_BODY}
/

-- Stop here if the package did not compile (SQL*Plus only warns).
DECLARE
  v_bad PLS_INTEGER;
BEGIN
  SELECT COUNT(*) INTO v_bad FROM user_objects
   WHERE object_name = '{S.upper()}' AND object_type IN ('PACKAGE', 'PACKAGE BODY')
     AND status <> 'VALID';
  IF v_bad > 0 THEN
    RAISE_APPLICATION_ERROR(-20700, '{S.upper()} is invalid: run SHOW ERRORS PACKAGE BODY {S}');
  END IF;
END;
/

-- The role that may execute the package (and nothing else on the tables).
SET DEFINE ON
DEFINE api_role = DBM_MEMORY_USER
BEGIN
  IF '&api_role' IS NOT NULL THEN
    BEGIN
      EXECUTE IMMEDIATE 'CREATE ROLE &api_role';
    EXCEPTION
      WHEN OTHERS THEN
        IF SQLCODE <> -1921 THEN  -- ORA-01921: the role exists
          RAISE;
        END IF;
    END;
    EXECUTE IMMEDIATE 'GRANT EXECUTE ON {S} TO &api_role';
  END IF;
END;
/
"""
