"""Oracle API, the reference-compatible surface of the package: the procedures and functions of
the reference PL/SQL memory API (the Oracle agent framework whose memory API dbmemory follows)
with its names, parameter order, defaults, BOOLEAN parameters and its two error numbers, each a
thin call of dbmemory's own NUMBER-returning ``*_n`` function, so PL/SQL written for the
reference API compiles and runs unchanged. For :mod:`dbmemory.sqlgen.oracle.api`."""

from __future__ import annotations

__all__: list[str] = []  # internal: the pieces of :mod:`dbmemory.sqlgen.oracle.api`

STORE_NOT_FOUND = 20423
"""The reference API's error number for a store that does not exist yet (``resolve_store_id``)."""
MISSING_CONTEXT = 20426
"""The reference API's error number for a context-scoped call without its context key/value."""

_ACTOR = ("SUBSTR(NVL(SYS_CONTEXT('APEX$SESSION', 'APP_USER'), "
          "SYS_CONTEXT('USERENV', 'SESSION_USER')), 1, 128)")
"""The audit actor of the reference writers (they take none): APEX's user, else the login."""

REFERENCE_CALLS: tuple[tuple[str, str], ...] = (
    ("PROCEDURE", "enable_for_agent"),
    ("PROCEDURE", "disable_for_agent"),
    ("PROCEDURE", "put_file"),
    ("PROCEDURE", "delete_file"),
    ("PROCEDURE", "clear_store_files"),
    ("PROCEDURE", "expire_files"),
    ("FUNCTION", "resolve_store_id"),
    ("FUNCTION", "get_file"),
    ("FUNCTION", "list_files"),
    ("FUNCTION", "get_memory_protocol"),
    ("PROCEDURE", "set_store"),
    ("PROCEDURE", "clear_store"),
)
"""The reference calls the package has under their reference names (kind, name)."""

REFERENCE_SPEC = f"""  -- The reference PL/SQL memory API, same names, order, defaults and BOOLEANs (PL/SQL only):
  -- thin calls of the *_n functions above (docs/sql-api.md maps each one)
  e_store_not_found EXCEPTION;  -- resolve_store_id: the store does not exist yet
  PRAGMA EXCEPTION_INIT(e_store_not_found, -{STORE_NOT_FOUND});
  e_missing_context EXCEPTION;  -- a context-scoped call without its context key or value
  PRAGMA EXCEPTION_INIT(e_missing_context, -{MISSING_CONTEXT});
  PROCEDURE enable_for_agent (
    p_agent_code      IN VARCHAR2,
    p_scope           IN VARCHAR2 DEFAULT c_scope_agent,
    p_store_code      IN VARCHAR2 DEFAULT NULL,
    p_context_key     IN VARCHAR2 DEFAULT NULL,
    p_update_profile  IN BOOLEAN  DEFAULT TRUE,
    p_max_file_chars  IN NUMBER   DEFAULT NULL,
    p_max_store_chars IN NUMBER   DEFAULT NULL,
    p_max_files       IN NUMBER   DEFAULT NULL
  );
  PROCEDURE disable_for_agent (
    p_agent_code      IN VARCHAR2,
    p_remove_tool_tag IN BOOLEAN DEFAULT TRUE,
    p_drop_store      IN BOOLEAN DEFAULT FALSE
  );
  PROCEDURE put_file (p_store_id IN NUMBER, p_path IN VARCHAR2, p_content IN CLOB);
  PROCEDURE delete_file (p_store_id IN NUMBER, p_path IN VARCHAR2);
  PROCEDURE clear_store_files (p_store_id IN NUMBER);
  PROCEDURE expire_files (p_days IN NUMBER, p_store_id IN NUMBER DEFAULT NULL);
  -- the store id (no row created: ORA-{STORE_NOT_FOUND} when it does not exist yet); a NULL
  -- p_store_code of a shared or context scope is the session's store (set_store)
  FUNCTION resolve_store_id (
    p_scope         IN VARCHAR2,
    p_agent_code    IN VARCHAR2 DEFAULT NULL,
    p_store_code    IN VARCHAR2 DEFAULT NULL,
    p_context_key   IN VARCHAR2 DEFAULT NULL,
    p_context_value IN VARCHAR2 DEFAULT NULL,
    p_user_id       IN VARCHAR2 DEFAULT NULL,
    p_session_id    IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER;
  -- the session's store code (package state, this session only) for calls outside an agent run
  PROCEDURE set_store (p_store_code IN VARCHAR2);
  PROCEDURE clear_store;
  FUNCTION current_store RETURN VARCHAR2;"""

_REMAP = f"""  EXCEPTION
    WHEN e_missing_context_key THEN
      IF same(p_scope, c_scope_context) THEN
        RAISE_APPLICATION_ERROR(-{MISSING_CONTEXT}, SUBSTR(SQLERRM, 12));
      END IF;
      RAISE;"""

REFERENCE_BODY = f"""  -- the reference PL/SQL memory API (see the spec)
  PROCEDURE enable_for_agent (
    p_agent_code IN VARCHAR2, p_scope IN VARCHAR2 DEFAULT c_scope_agent,
    p_store_code IN VARCHAR2 DEFAULT NULL, p_context_key IN VARCHAR2 DEFAULT NULL,
    p_update_profile IN BOOLEAN DEFAULT TRUE, p_max_file_chars IN NUMBER DEFAULT NULL,
    p_max_store_chars IN NUMBER DEFAULT NULL, p_max_files IN NUMBER DEFAULT NULL
  ) IS
    -- p_update_profile: dbmemory keeps no agent profile or tool tag in the database (the MEMORY
    -- tool is attached by the agent runtime), so either value configures the same rows
    v_stores NUMBER;
  BEGIN
    v_stores := enable_for_agent_n(p_agent_code, p_scope, p_store_code, p_context_key,
                                   p_max_file_chars => p_max_file_chars,
                                   p_max_files => p_max_files,
                                   p_max_store_chars => p_max_store_chars);
{_REMAP}
  END enable_for_agent;

  PROCEDURE disable_for_agent (
    p_agent_code IN VARCHAR2, p_remove_tool_tag IN BOOLEAN DEFAULT TRUE,
    p_drop_store IN BOOLEAN DEFAULT FALSE
  ) IS
    -- p_remove_tool_tag: as p_update_profile of enable_for_agent (no tool tag kept here);
    -- p_drop_store NULL is refused like a NULL drop_store of disable_for_agent_n
    v_dropped NUMBER;
  BEGIN
    v_dropped := disable_for_agent_n(p_agent_code,
                                     CASE WHEN p_drop_store THEN 1 WHEN NOT p_drop_store THEN 0 END);
  END disable_for_agent;

  PROCEDURE put_file (p_store_id IN NUMBER, p_path IN VARCHAR2, p_content IN CLOB) IS
    v_version NUMBER;
  BEGIN
    v_version := put_file_n(p_store_id, p_path, p_content, {_ACTOR});
  END put_file;

  PROCEDURE delete_file (p_store_id IN NUMBER, p_path IN VARCHAR2) IS
    v_deleted NUMBER;
  BEGIN
    v_deleted := delete_file_n(p_store_id, p_path, {_ACTOR});
  END delete_file;

  PROCEDURE clear_store_files (p_store_id IN NUMBER) IS
    v_deleted NUMBER;
  BEGIN
    v_deleted := clear_store_files_n(p_store_id, {_ACTOR});
  END clear_store_files;

  PROCEDURE expire_files (p_days IN NUMBER, p_store_id IN NUMBER DEFAULT NULL) IS
    v_expired NUMBER;
  BEGIN
    v_expired := expire_files_n(p_days, p_store_id);
  END expire_files;

  FUNCTION resolve_store_id (
    p_scope IN VARCHAR2, p_agent_code IN VARCHAR2 DEFAULT NULL,
    p_store_code IN VARCHAR2 DEFAULT NULL, p_context_key IN VARCHAR2 DEFAULT NULL,
    p_context_value IN VARCHAR2 DEFAULT NULL, p_user_id IN VARCHAR2 DEFAULT NULL,
    p_session_id IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER IS
    v_code VARCHAR2(200 CHAR) := p_store_code;
  BEGIN
    IF v_code IS NULL AND (same(p_scope, c_scope_shared) OR same(p_scope, c_scope_context)) THEN
      v_code := g_store_code;
    END IF;
    RETURN resolve_store_id_n(p_scope, p_agent_code, p_user_id, p_session_id, v_code,
                              p_context_key, p_context_value);
  EXCEPTION
    WHEN e_not_found THEN
      RAISE_APPLICATION_ERROR(-{STORE_NOT_FOUND}, SUBSTR(SQLERRM, 12));
    WHEN e_missing_context_key THEN
      IF same(p_scope, c_scope_context) THEN
        RAISE_APPLICATION_ERROR(-{MISSING_CONTEXT}, SUBSTR(SQLERRM, 12));
      END IF;
      RAISE;
  END resolve_store_id;

  PROCEDURE set_store (p_store_code IN VARCHAR2) IS
  BEGIN
    g_store_code := component(p_store_code, 'a store code', c_scope_shared);
  END set_store;

  PROCEDURE clear_store IS
  BEGIN
    g_store_code := NULL;
  END clear_store;

  FUNCTION current_store RETURN VARCHAR2 IS
  BEGIN
    RETURN g_store_code;
  END current_store;
"""
"""The package body's part for :data:`REFERENCE_SPEC`; needs ``g_store_code`` declared first."""
