"""The in-database API for Oracle 19c+: package ``dbm_memory`` (definer rights), errors
``raise_application_error`` -20701 .. -20707 with named exceptions (see
:mod:`dbmemory.sqlgen.api`). Rendered and reviewed, not yet run on a live Oracle server."""

from __future__ import annotations

from dbmemory.keys import SCOPES
from dbmemory.paths import ROOT
from dbmemory.sqlgen.api_common import (
    ADMIN_ACTOR,
    API_ERRORS,
    API_NAME,
    API_ROLE,
    DAYS_RULE,
    EXPIRY_API_ACTOR,
    MARKER,
    MIRRORED as M,
    RESERVED,
    SCOPE_LIST,
)

from dbmemory.sqlgen.api_oracle_rules import _BODY_RULES, _DIR_PROBE, _OWN, _audit, _protocol_expr

__all__ = ["oracle_statements", "oracle_script_body", "oracle_grants", "oracle_uninstall"]

S = API_NAME


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _scope_constants() -> str:
    return "\n".join(f"  c_scope_{s:<8} CONSTANT VARCHAR2(10) := '{s}';" for s in SCOPES)


def _exceptions() -> str:
    lines = []
    for e in API_ERRORS:
        lines.append(f"  e_{e.name} EXCEPTION;  -- {e.meaning[:70]}")
        lines.append(f"  PRAGMA EXCEPTION_INIT(e_{e.name}, -{e.number});")
    return "\n".join(lines)


_SPEC = f"""CREATE OR REPLACE PACKAGE {S} AUTHID DEFINER AS
  -- dbmemory's memory API: the rules of the Python API (dbmemory.files, dbmemory.stores,
  -- dbmemory.expiry); every call joins the caller's transaction, none commits.
  -- Scopes (dbmemory.keys.SCOPES)
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

  FUNCTION resolve_store_id (
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
  -- the writers are functions (called from PL/SQL, not from SQL): they return a result
  FUNCTION put_file (p_store_id IN NUMBER, p_path IN VARCHAR2, p_text IN CLOB,
                     p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER;
  FUNCTION delete_file (p_store_id IN NUMBER, p_path IN VARCHAR2,
                        p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER;
  FUNCTION clear_store_files (p_store_id IN NUMBER,
                              p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER;
  FUNCTION enable_for_agent (
    p_agent_code      IN VARCHAR2,
    p_scope           IN VARCHAR2 DEFAULT c_scope_agent,
    p_store_code      IN VARCHAR2 DEFAULT NULL,
    p_context_key     IN VARCHAR2 DEFAULT NULL,
    p_max_file_chars  IN NUMBER DEFAULT NULL,
    p_max_files       IN NUMBER DEFAULT NULL,
    p_max_store_chars IN NUMBER DEFAULT NULL
  ) RETURN NUMBER;
  FUNCTION disable_for_agent (p_agent_code IN VARCHAR2, p_drop_store IN NUMBER DEFAULT 0)
    RETURN NUMBER;
  FUNCTION expire_files (p_days IN NUMBER, p_store_id IN NUMBER DEFAULT NULL) RETURN NUMBER;
  FUNCTION get_memory_protocol RETURN CLOB;
END {S};"""


_BODY = _BODY_RULES + "\n" + f"""  FUNCTION store_key (
    p_scope IN VARCHAR2, p_agent_code IN VARCHAR2, p_user_id IN VARCHAR2,
    p_session_id IN VARCHAR2, p_store_code IN VARCHAR2,
    p_context_key IN VARCHAR2, p_context_value IN VARCHAR2
  ) RETURN VARCHAR2 IS
    -- dbmemory.keys.build_store_key: every component checked, the reserved namespace unreachable
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

  FUNCTION resolve_store_id (
    p_scope IN VARCHAR2, p_agent_code IN VARCHAR2 DEFAULT NULL, p_user_id IN VARCHAR2 DEFAULT NULL,
    p_session_id IN VARCHAR2 DEFAULT NULL, p_store_code IN VARCHAR2 DEFAULT NULL,
    p_context_key IN VARCHAR2 DEFAULT NULL, p_context_value IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER IS
    -- dbmemory.stores.resolve_store_id: build_store_key, then find_store_id
    v_key VARCHAR2(700 CHAR) := store_key(p_scope, p_agent_code, p_user_id, p_session_id,
                                          p_store_code, p_context_key, p_context_value);
    v_id  NUMBER;
  BEGIN
    SELECT store_id INTO v_id FROM dbm_stores WHERE store_key = v_key;
    RETURN v_id;
  EXCEPTION
    WHEN NO_DATA_FOUND THEN
      fail('not_found', 'store ' || v_key || ' does not exist (it is created on its first write)');
  END resolve_store_id;

  FUNCTION open_store (
    p_scope IN VARCHAR2, p_agent_code IN VARCHAR2 DEFAULT NULL, p_user_id IN VARCHAR2 DEFAULT NULL,
    p_session_id IN VARCHAR2 DEFAULT NULL, p_store_code IN VARCHAR2 DEFAULT NULL,
    p_context_key IN VARCHAR2 DEFAULT NULL, p_context_value IN VARCHAR2 DEFAULT NULL
  ) RETURN NUMBER IS
    -- dbmemory.store_lock.get_or_create_store with a StoreRef without caps: the store id, the
    -- row created when missing with dbmemory.caps.creation_caps (the strictest enabled
    -- configurations that name the store, else the defaults); no audit event, as in Python
    v_key VARCHAR2(700 CHAR) := store_key(p_scope, p_agent_code, p_user_id, p_session_id,
                                          p_store_code, p_context_key, p_context_value);
    v_id  NUMBER;
    v_fc  NUMBER;
    v_nf  NUMBER;
    v_sc  NUMBER;
    v_now TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  BEGIN
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

  FUNCTION list_files (p_store_id IN NUMBER) RETURN t_file_infos PIPELINED IS
    -- dbmemory.files.list_files: every file without its text, by path in code-point order
    v_row t_file_info;
  BEGIN
    check_store_id(p_store_id);
    FOR r IN (SELECT file_path, char_count, version_no, created_at, updated_at, last_accessed_at
                FROM dbm_files WHERE store_id = p_store_id
               ORDER BY NLSSORT(file_path, 'NLS_SORT=BINARY')) LOOP
      v_row.path := r.file_path;
      v_row.chars := r.char_count;
      v_row.version := r.version_no;
      v_row.created_at := r.created_at;
      v_row.updated_at := r.updated_at;
      v_row.last_accessed_at := r.last_accessed_at;
      PIPE ROW (v_row);
    END LOOP;
    RETURN;
  END list_files;

  FUNCTION get_file (p_store_id IN NUMBER, p_path IN VARCHAR2) RETURN CLOB IS
    -- dbmemory.files.get_file (touch=False): the text; an empty file is NULL ('' on Oracle)
    v_body CLOB;
    v_hash VARCHAR2(64);
  BEGIN
    check_store_id(p_store_id);
    check_path(p_path);
    v_hash := path_hash(p_path);
    SELECT body INTO v_body FROM dbm_files
     WHERE store_id = p_store_id AND path_hash = v_hash;
    RETURN v_body;
  EXCEPTION
    WHEN NO_DATA_FOUND THEN
      fail('not_found', 'the path ' || p_path || ' does not exist');
  END get_file;

  FUNCTION put_file (p_store_id IN NUMBER, p_path IN VARCHAR2, p_text IN CLOB,
                     p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER IS
    -- dbmemory.files.put_file (enforce_caps, no expected version, expiry flag kept): create or
    -- replace; returns the file's version after the write. NULL text = '' (Oracle).
    v_key   VARCHAR2(700 CHAR);
    v_mfc   NUMBER;
    v_mf    NUMBER;
    v_msc   NUMBER;
    v_nfiles NUMBER;
    v_nchars NUMBER;
    v_hash  VARCHAR2(64);
    v_anc   VARCHAR2(64);
    v_fid   NUMBER;
    v_old   NUMBER;
    v_ver   NUMBER;
    v_body  CLOB;
    v_new   CLOB;  -- the text to store: NULL for an empty file, as Python stores it
    v_chars NUMBER;
    v_bad   NUMBER;
    v_now   TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  BEGIN
    check_store_id(p_store_id);
    check_path(p_path);
    IF same(p_path, '{ROOT}') THEN
      fail('invalid_path', 'cannot write the memory root {ROOT}: name a file or directory inside it');
    END IF;
    IF p_text IS NOT NULL AND DBMS_LOB.INSTR(p_text, CHR(0)) > 0 THEN
      fail('invalid_argument', 'file text contains a NUL character (U+0000), which cannot be stored: remove it');
    END IF;
    v_hash := path_hash(p_path);
    v_chars := text_chars(p_text);
    IF v_chars > 0 THEN
      v_new := p_text;
    END IF;
    lock_store(p_store_id, v_key, v_mfc, v_mf, v_msc, v_nfiles, v_nchars);
    BEGIN
      SELECT file_id, char_count, version_no, body INTO v_fid, v_old, v_ver, v_body
        FROM dbm_files WHERE store_id = p_store_id AND path_hash = v_hash FOR UPDATE;
    EXCEPTION
      WHEN NO_DATA_FOUND THEN v_fid := NULL;
    END;
    IF v_fid IS NULL THEN
      IF v_chars > v_mfc THEN
        check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, NULL);
      END IF;
      -- dbmemory.store_lock._check_new_file_shape
      FOR i IN {len(ROOT) + 2} .. LENGTH(p_path) LOOP
        IF ASCII(SUBSTR(p_path, i, 1)) = 47 THEN
          v_anc := path_hash(SUBSTR(p_path, 1, i - 1));
          SELECT COUNT(*) INTO v_bad FROM dbm_files
           WHERE store_id = p_store_id AND path_hash = v_anc;
          IF v_bad > 0 THEN
            fail('invalid_path', 'cannot use ' || p_path || ': a file exists where one of its parent directories would be; a path cannot be a file and a directory at once: choose another path');
          END IF;
        END IF;
      END LOOP;
      {_DIR_PROBE};
      IF v_bad > 0 THEN
        fail('invalid_path', p_path || ' is a directory: choose a file path inside it or another name');
      END IF;
      check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, NULL);
      INSERT INTO dbm_files
        (store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,
         created_at, updated_at, last_accessed_at)
      VALUES (p_store_id, p_path, v_hash, v_new, v_chars, 1, 0,
              v_now, v_now, v_now);
      store_row_update(p_store_id, 1, v_chars, v_now);
      {_audit("p_store_id", "v_key", "p_path", "put", "p_actor", "NULL", "v_chars", "NULL")};
      RETURN 1;
    END IF;
    IF v_old = v_chars AND (v_chars = 0 OR DBMS_LOB.COMPARE(v_body, p_text) = 0) THEN
      RETURN v_ver;  -- unchanged: nothing written, no audit event
    END IF;
    check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, v_old);
    UPDATE dbm_files
       SET body = v_new, char_count = v_chars,
           version_no = v_ver + 1, updated_at = v_now, last_accessed_at = v_now
     WHERE file_id = v_fid;
    store_row_update(p_store_id, 0, v_chars - v_old, v_now);
    {_audit("p_store_id", "v_key", "p_path", "put", "p_actor", "v_old", "v_chars", "NULL")};
    RETURN v_ver + 1;
  END put_file;

  FUNCTION delete_file (p_store_id IN NUMBER, p_path IN VARCHAR2,
                        p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER IS
    -- dbmemory.files.delete_file: 1 when the file existed, 0 when nothing was there
    v_key VARCHAR2(700 CHAR);
    v_mfc NUMBER;
    v_mf  NUMBER;
    v_msc NUMBER;
    v_nfiles NUMBER;
    v_nchars NUMBER;
    v_fid NUMBER;
    v_old NUMBER;
    v_bad NUMBER;
    v_hash VARCHAR2(64);
    v_now TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  BEGIN
    check_store_id(p_store_id);
    check_path(p_path);
    v_hash := path_hash(p_path);
    IF same(p_path, '{ROOT}') THEN
      fail('invalid_path', 'cannot delete the memory root {ROOT}: name a file or directory inside it');
    END IF;
    lock_store(p_store_id, v_key, v_mfc, v_mf, v_msc, v_nfiles, v_nchars);
    BEGIN
      SELECT file_id, char_count INTO v_fid, v_old FROM dbm_files
       WHERE store_id = p_store_id AND path_hash = v_hash FOR UPDATE;
    EXCEPTION
      WHEN NO_DATA_FOUND THEN v_fid := NULL;
    END;
    IF v_fid IS NULL THEN
      {_DIR_PROBE};
      IF v_bad > 0 THEN
        fail('invalid_path', p_path || ' is a directory, not a file: delete_file deletes one file');
      END IF;
      RETURN 0;
    END IF;
    DELETE FROM dbm_files WHERE file_id = v_fid;
    store_row_update(p_store_id, -1, -v_old, v_now);
    {_audit("p_store_id", "v_key", "p_path", "delete", "p_actor", "v_old", "NULL", "NULL")};
    RETURN 1;
  END delete_file;

  FUNCTION clear_store_files (p_store_id IN NUMBER,
                              p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER IS
    -- dbmemory.files.clear_store_files: every file deleted, one 'clear' event each
    v_key   VARCHAR2(700 CHAR);
    v_mfc   NUMBER;
    v_mf    NUMBER;
    v_msc   NUMBER;
    v_nfiles NUMBER;
    v_nchars NUMBER;
    v_count NUMBER := 0;
    v_chars NUMBER := 0;
    v_now   TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  BEGIN
    check_store_id(p_store_id);
    lock_store(p_store_id, v_key, v_mfc, v_mf, v_msc, v_nfiles, v_nchars);
    FOR f IN (SELECT file_id, file_path, char_count FROM dbm_files WHERE store_id = p_store_id
               ORDER BY NLSSORT(file_path, 'NLS_SORT=BINARY')) LOOP
      DELETE FROM dbm_files WHERE file_id = f.file_id;
      {_audit("p_store_id", "v_key", "f.file_path", "clear", "p_actor", "f.char_count", "NULL", "NULL")};
      v_count := v_count + 1;
      v_chars := v_chars + f.char_count;
    END LOOP;
    IF v_count > 0 THEN
      store_row_update(p_store_id, -v_count, -v_chars, v_now);
    END IF;
    RETURN v_count;
  END clear_store_files;

  FUNCTION enable_for_agent (
    p_agent_code IN VARCHAR2, p_scope IN VARCHAR2 DEFAULT c_scope_agent,
    p_store_code IN VARCHAR2 DEFAULT NULL, p_context_key IN VARCHAR2 DEFAULT NULL,
    p_max_file_chars IN NUMBER DEFAULT NULL, p_max_files IN NUMBER DEFAULT NULL,
    p_max_store_chars IN NUMBER DEFAULT NULL
  ) RETURN NUMBER IS
    -- dbmemory.stores.enable_for_agent: upsert the configuration (NULL cap = default), set the
    -- caps of the existing stores it names; returns how many stores got them
    v_fc      NUMBER := NVL(p_max_file_chars, {M["DEFAULT_MAX_FILE_CHARS"]});  -- dbmemory.model.DEFAULT_MAX_FILE_CHARS
    v_nf      NUMBER := NVL(p_max_files, {M["DEFAULT_MAX_FILES"]});  -- dbmemory.model.DEFAULT_MAX_FILES
    v_sfc     NUMBER;
    v_snf     NUMBER;
    v_ssc     NUMBER;
    v_code    VARCHAR2(200 CHAR);
    v_ctx     VARCHAR2(200 CHAR);
    v_key     VARCHAR2(700 CHAR);
    v_prefix  NUMBER;
    v_owned   NUMBER;
    v_found   NUMBER;
    v_changed NUMBER := 0;
    v_now     TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  BEGIN
    -- dbmemory.stores._refuse_reserved_names
    IF same(p_scope, '{RESERVED}') THEN
      fail('invalid_scope', 'scope ''{RESERVED}'' holds the stores dbmemory owns itself (user profiles, memory items, organisation memory) and no agent can use it: pick one of {SCOPE_LIST}');
    END IF;
    IF same(LOWER(p_agent_code), '{RESERVED}') OR same(LOWER(p_store_code), '{RESERVED}') THEN
      fail('invalid_scope', 'that name is the name of the namespace dbmemory keeps for its own stores (user profiles, memory items, organisation memory): choose another name');
    END IF;
    v_code := component(p_agent_code, 'agent code', p_scope);
    IF NOT (same(p_scope, c_scope_agent) OR same(p_scope, c_scope_user) OR same(p_scope, c_scope_session)
            OR same(p_scope, c_scope_shared) OR same(p_scope, c_scope_global) OR same(p_scope, c_scope_context)) THEN
      fail('invalid_scope', 'scope ''' || p_scope || ''' is not one of {SCOPE_LIST}: pick one of them');
    END IF;
    IF p_store_code IS NOT NULL THEN
      v_code := component(p_store_code, 'store code', p_scope);
    END IF;
    IF p_context_key IS NOT NULL THEN
      v_ctx := component(p_context_key, 'context key', p_scope);
    END IF;
    IF same(p_scope, c_scope_shared) AND p_store_code IS NULL THEN
      fail('missing_context_key', 'scope ''shared'' needs store_code: pass the shared store''s code');
    END IF;
    IF same(p_scope, c_scope_context) AND p_context_key IS NULL THEN
      fail('missing_context_key', 'scope ''context'' needs context_key: pass the run-context key that names the store');
    END IF;
    -- dbmemory.model.Caps: positive whole numbers within INTEGER / BIGINT
    IF v_fc < 1 OR v_nf < 1 OR v_fc > {M["INT32_MAX"]} OR v_nf > {M["INT32_MAX"]} OR p_max_store_chars < 1
       OR v_fc <> TRUNC(v_fc) OR v_nf <> TRUNC(v_nf) OR p_max_store_chars <> TRUNC(p_max_store_chars) THEN
      fail('invalid_argument', 'caps must be positive whole numbers, got max_file_chars=' || v_fc
        || ' max_files=' || v_nf || ' max_store_chars=' || NVL(TO_CHAR(p_max_store_chars), 'none'));
    END IF;
    v_code := CASE WHEN p_scope IN (c_scope_shared, c_scope_context) THEN p_store_code END;
    v_ctx := CASE WHEN p_scope = c_scope_context THEN p_context_key END;
    SELECT COUNT(*) INTO v_found FROM dbm_agents WHERE agent_code = p_agent_code;
    IF v_found > 0 THEN
      FOR r IN (SELECT agent_code FROM dbm_agents WHERE agent_code = p_agent_code FOR UPDATE) LOOP
        NULL;
      END LOOP;
      UPDATE dbm_agents
         SET scope_name = p_scope, store_code = v_code, context_key = v_ctx, memory_enabled = 1,
             updated_at = v_now, max_file_chars = v_fc, max_files = v_nf,
             max_store_chars = p_max_store_chars
       WHERE agent_code = p_agent_code;
    ELSE
      INSERT INTO dbm_agents
        (agent_code, scope_name, store_code, context_key, max_file_chars, max_files,
         max_store_chars, memory_enabled, created_at, updated_at)
      VALUES (p_agent_code, p_scope, v_code, v_ctx, v_fc, v_nf, p_max_store_chars, 1, v_now, v_now);
    END IF;
    -- dbmemory.caps.configured_store_key
    v_key := CASE p_scope
      WHEN c_scope_agent THEN 'agent:' || p_agent_code
      WHEN c_scope_user THEN 'user:' || p_agent_code || ':'
      WHEN c_scope_shared THEN 'shared:' || v_code
      WHEN c_scope_global THEN 'global'
      WHEN c_scope_context THEN 'context:'
        || CASE WHEN v_code IS NOT NULL THEN '{MARKER}:' || v_code ELSE p_agent_code END
        || ':' || v_ctx || ':'
      END;
    v_prefix := CASE WHEN p_scope IN (c_scope_user, c_scope_context) THEN 1 ELSE 0 END;
    v_owned := CASE WHEN p_scope IN (c_scope_agent, c_scope_user)
                      OR (p_scope = c_scope_context AND v_code IS NULL) THEN 1 ELSE 0 END;
    IF v_key IS NOT NULL THEN
      IF v_owned = 1 THEN
        v_sfc := v_fc; v_snf := v_nf; v_ssc := p_max_store_chars;
      ELSE
        -- dbmemory.stores._strictest_configured (this configuration included)
        SELECT MIN(a.max_file_chars), MIN(a.max_files), MIN(a.max_store_chars)
          INTO v_sfc, v_snf, v_ssc
          FROM dbm_agents a
         WHERE a.memory_enabled = 1 AND a.scope_name = p_scope
           AND (p_scope = c_scope_global
                OR (a.store_code = v_code AND (p_scope = c_scope_shared OR a.context_key = v_ctx)));
      END IF;
      UPDATE dbm_stores s
         SET max_file_chars = v_sfc, max_files = v_snf, max_store_chars = v_ssc, updated_at = v_now
       WHERE ((v_prefix = 1 AND SUBSTR(s.store_key, 1, LENGTH(v_key)) = v_key)
              OR (v_prefix = 0 AND s.store_key = v_key))
         AND s.scope_name = p_scope
         AND (p_scope IN (c_scope_shared, c_scope_global)
              OR (((v_owned = 1 AND s.agent_code = p_agent_code) OR (v_owned = 0 AND s.agent_code IS NULL))
                  AND ((v_code IS NULL AND s.store_code IS NULL) OR s.store_code = v_code)));
      v_changed := SQL%ROWCOUNT;
    END IF;
    {_audit("NULL", "NULL", "NULL", "agent_enable", f"'{ADMIN_ACTOR}'", "NULL", "NULL",
            "p_agent_code || ':' || p_scope || '; max_file_chars=' || v_fc || ' max_files=' || v_nf"
            " || ' max_store_chars=' || NVL(TO_CHAR(p_max_store_chars), 'none') || '; ' || v_changed || ' stores'")};
    RETURN v_changed;
  END enable_for_agent;

  FUNCTION disable_for_agent (p_agent_code IN VARCHAR2, p_drop_store IN NUMBER DEFAULT 0)
    RETURN NUMBER IS
    -- dbmemory.stores.disable_for_agent (+ drop_stores of its own stores); p_drop_store 1/0
    v_found   NUMBER;
    v_files   NUMBER;
    v_chars   NUMBER;
    v_dropped NUMBER := 0;
    v_now     TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
    v_code    VARCHAR2(200 CHAR);
  BEGIN
    v_code := component(p_agent_code, 'agent code', c_scope_agent);
    IF p_drop_store IS NULL OR p_drop_store NOT IN (0, 1) THEN
      fail('invalid_argument', 'drop_store must be 1 or 0');
    END IF;
    SELECT COUNT(*) INTO v_found FROM dbm_agents WHERE agent_code = p_agent_code;
    IF v_found = 0 THEN
      fail('not_found', 'agent ''' || p_agent_code || ''' has no memory configuration: call enable_for_agent first');
    END IF;
    UPDATE dbm_agents SET memory_enabled = 0, updated_at = v_now WHERE agent_code = p_agent_code;
    {_audit("NULL", "NULL", "NULL", "agent_disable", f"'{ADMIN_ACTOR}'", "NULL", "NULL", "p_agent_code")};
    IF p_drop_store = 0 THEN
      RETURN 0;
    END IF;
    -- dbmemory.stores._own_store_ids by exact key; all locked first, ascending keys
    FOR s IN (SELECT s.store_id FROM dbm_stores s WHERE {_OWN}
               ORDER BY s.store_key FOR UPDATE) LOOP
      NULL;
    END LOOP;
    FOR s IN (SELECT s.store_id, s.store_key FROM dbm_stores s WHERE {_OWN}
               ORDER BY s.store_id) LOOP
      SELECT COUNT(*), NVL(SUM(char_count), 0) INTO v_files, v_chars
        FROM dbm_files WHERE store_id = s.store_id;
      DELETE FROM dbm_files WHERE store_id = s.store_id;
      DELETE FROM dbm_stores WHERE store_id = s.store_id;
      {_audit("s.store_id", "s.store_key", "NULL", "store_drop", f"'{ADMIN_ACTOR}'", "v_chars", "NULL", "v_files || ' files'")};
      v_dropped := v_dropped + 1;
    END LOOP;
    RETURN v_dropped;
  END disable_for_agent;

  FUNCTION expire_files (p_days IN NUMBER, p_store_id IN NUMBER DEFAULT NULL) RETURN NUMBER IS
    -- dbmemory.expiry.expire_files in the caller's transaction (run it at READ COMMITTED),
    -- never committed here; returns the number of files deleted
    c_batch_size     CONSTANT PLS_INTEGER := 1000;
    -- dbmemory.touch.TOUCH_INTERVAL
    c_touch_interval CONSTANT INTERVAL DAY TO SECOND := NUMTODSINTERVAL({M["TOUCH_INTERVAL_S"]}, 'SECOND');
    TYPE t_numbers IS TABLE OF NUMBER;
    TYPE t_paths IS TABLE OF dbm_files.file_path%TYPE;
    v_now       TIMESTAMP(6) := SYS_EXTRACT_UTC(SYSTIMESTAMP);
    v_cutoff    TIMESTAMP(6);
    v_ids       t_numbers;
    v_file_ids  t_numbers;
    v_store_ids t_numbers;
    v_sizes     t_numbers;
    v_paths     t_paths;
    v_total     NUMBER := 0;
    -- dbmemory.expiry._expire_batch, the writers' lock order: the store rows first (SKIP
    -- LOCKED: a store being written waits for the next run; with SKIP LOCKED a row is locked
    -- when fetched), then the expired files of the stores held, deleted with the rule again
    CURSOR c_stores (p_cutoff TIMESTAMP) IS
      SELECT s.store_id FROM dbm_stores s
       WHERE (p_store_id IS NULL OR s.store_id = p_store_id)
         AND EXISTS (SELECT 1 FROM dbm_files f
                      WHERE f.store_id = s.store_id
                        AND f.expiry_exempt = 0 AND f.last_accessed_at < p_cutoff
                        AND NOT EXISTS (SELECT 1 FROM dbm_file_reads r
                                         WHERE r.file_id = f.file_id AND r.read_at >= p_cutoff))
         FOR UPDATE SKIP LOCKED;
  BEGIN
    -- dbmemory.expiry.validate_days (MIN_EXPIRY_DAYS, MAX_EXPIRY_DAYS)
    IF p_days IS NULL OR p_days * 86400 < {M["TOUCH_INTERVAL_S"]} THEN
      fail('invalid_argument', '{DAYS_RULE}, got ' || NVL(TO_CHAR(p_days), 'NULL') || ': pass e.g. days=30');
    END IF;
    IF p_days > {M["MAX_EXPIRY_DAYS"]} THEN
      fail('invalid_argument', 'days=' || p_days || ' is too large: pass at most {M["MAX_EXPIRY_DAYS"]} (about 270 years)');
    END IF;
    IF p_store_id IS NOT NULL THEN
      check_store_id(p_store_id);
    END IF;
    v_cutoff := v_now - NUMTODSINTERVAL(p_days, 'DAY') - c_touch_interval;
    LOOP
      -- reads being recorded hold the table in ROW SHARE mode (dbmemory.db.dialect.job_lock)
      LOCK TABLE dbm_job_locks IN EXCLUSIVE MODE;
      OPEN c_stores(v_cutoff);
      FETCH c_stores BULK COLLECT INTO v_ids LIMIT c_batch_size;
      CLOSE c_stores;
      EXIT WHEN v_ids.COUNT = 0;
      FORALL i IN 1 .. v_ids.COUNT
        DELETE FROM dbm_files f
         WHERE f.store_id = v_ids(i)
           AND f.expiry_exempt = 0 AND f.last_accessed_at < v_cutoff
           AND NOT EXISTS (SELECT 1 FROM dbm_file_reads r
                            WHERE r.file_id = f.file_id AND r.read_at >= v_cutoff)
        RETURNING f.file_id, f.store_id, f.file_path, f.char_count
          BULK COLLECT INTO v_file_ids, v_store_ids, v_paths, v_sizes;
      -- the counters of the stores held move by what is really gone (statements.ADJUST_STORE)
      FORALL i IN 1 .. v_file_ids.COUNT
        UPDATE dbm_stores
           SET file_count = file_count - 1, total_chars = total_chars - v_sizes(i),
               updated_at = v_now
         WHERE store_id = v_store_ids(i);
      FORALL i IN 1 .. v_file_ids.COUNT
        INSERT INTO dbm_audit_events
          (store_id, store_key, file_path, action_name, actor_name,
           chars_before, chars_after, detail_text, created_at)
        VALUES
          (v_store_ids(i), (SELECT s.store_key FROM dbm_stores s WHERE s.store_id = v_store_ids(i)),
           v_paths(i), 'expire', '{EXPIRY_API_ACTOR}', v_sizes(i), NULL, NULL, v_now);
      FORALL i IN 1 .. v_file_ids.COUNT
        DELETE FROM dbm_file_reads WHERE file_id = v_file_ids(i);
      v_total := v_total + v_file_ids.COUNT;
      EXIT WHEN v_ids.COUNT < c_batch_size;
    END LOOP;
    DELETE FROM dbm_file_reads r
     WHERE r.read_at < v_cutoff
       AND NOT EXISTS (SELECT 1 FROM dbm_files f WHERE f.file_id = r.file_id);
    RETURN v_total;
  END expire_files;

  FUNCTION get_memory_protocol RETURN CLOB IS
  BEGIN
    -- dbmemory.prompts.get_memory_protocol(), character for character
    RETURN TO_CLOB({_protocol_expr()});
  END get_memory_protocol;

END {S};"""


# SQL*Plus ends a block at a blank line unless SQLBLANKLINES is on: the package has none
_SPEC = "\n".join(line for line in _SPEC.splitlines() if line.strip())
_BODY = "\n".join(line for line in _BODY.splitlines() if line.strip())


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
DEFINE api_role = {API_ROLE.upper()}
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
