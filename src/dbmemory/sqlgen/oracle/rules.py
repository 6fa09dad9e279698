"""Oracle API, the shared rules: the package body's private part (errors, binary comparison,
key components, the path subset, the path hash, the caps fragment, the store lock)
(:mod:`dbmemory.sqlgen.oracle.api`)."""


from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.db.dialect.types import PATH_KEY_CHARS
from dbmemory.sqlgen.api_common import (
    ADMIN_ACTOR,
    API_ERRORS,
    API_NAME,
    COMPONENT_RULE,
    MAX_ACTOR_CHARS,
    MAX_DETAIL_CHARS,
    PATH_RULE,
    RESERVED_PREFIX,
    RESERVED_STORE_RULE,
    own_store_condition,
    protocol_parts,
)
from dbmemory.sqlgen.api_common import (
    MIRRORED as M,
)

__all__ = [
    "protocol_expr",
    "audit",
    "DIR_PROBE",
    "OWN",
    "BODY_RULES",
]

S = API_NAME


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _fail_cases() -> str:
    return "\n".join(f"      WHEN '{e.name}' THEN -{e.number}" for e in API_ERRORS)


def protocol_expr() -> str:
    """dbmemory.tool.protocol.get_memory_protocol as one expression of ASCII literals and UNISTR()."""

    def code_point(char: str) -> str:
        return f"TO_CHAR(UNISTR('\\{ord(char):04X}'))"

    lines = [" || ".join(parts) if parts else "''" for parts in protocol_parts(_q, code_point)]
    return "\n      || CHR(10) || ".join(lines)


def audit(store_id: str, key: str, path: str, action: str, actor: str, before: str,
           after: str, detail: str) -> str:
    """dbmemory.store.audit._audit_rows: actor cut at 500 (NULL, and so '', -> the default), detail at 1,000."""
    return f"""INSERT INTO dbm_audit_events
      (store_id, store_key, file_path, action_name, actor_name,
       chars_before, chars_after, detail_text, created_at)
    VALUES ({store_id}, {key}, {path}, '{action}', SUBSTR(NVL({actor}, '{ADMIN_ACTOR}'), 1, {MAX_ACTOR_CHARS}),
            {before}, {after}, SUBSTR({detail}, 1, {MAX_DETAIL_CHARS}), v_now)"""


DIR_PROBE = "v_bad := files_under(p_store_id, p_path)"
"""Files under ``p_path/`` (it is a directory): ``files_under`` of the package body."""

OWN = own_store_condition(
    lambda prefix: f"s.store_key = '{prefix}' || p_agent_code",
    lambda prefix, n: f"SUBSTR(s.store_key, 1, LENGTH(p_agent_code) + {n}) = '{prefix}' || p_agent_code || ':'",
    lambda count: f"REGEXP_COUNT(s.store_key, ':') = {count}",
)


BODY_RULES = f"""CREATE OR REPLACE PACKAGE BODY {S} AS

  PROCEDURE fail (p_code IN VARCHAR2, p_message IN VARCHAR2) IS
  BEGIN
    RAISE_APPLICATION_ERROR(CASE p_code
{_fail_cases()}
      ELSE -20703 END, SUBSTR(p_code || ': ' || p_message, 1, 2000));
  END fail;

  -- binary equality, whatever NLS_COMP/NLS_SORT the session uses (APEX: often LINGUISTIC)
  FUNCTION same (a IN VARCHAR2, b IN VARCHAR2) RETURN BOOLEAN IS
  BEGIN
    RETURN a IS NOT NULL AND b IS NOT NULL AND UTL_RAW.CAST_TO_RAW(a) = UTL_RAW.CAST_TO_RAW(b);
  END same;

  -- dbmemory.core.keys.validate_component (MAX_COMPONENT_CHARS, [A-Za-z0-9_.-]) on code values
  FUNCTION component (p_value IN VARCHAR2, p_what IN VARCHAR2, p_scope IN VARCHAR2)
    RETURN VARCHAR2 IS
    v_code PLS_INTEGER;
  BEGIN
    IF p_value IS NULL THEN  -- Oracle: '' is NULL
      fail('missing_context_key', 'scope ''' || p_scope || ''' needs ' || p_what || ': pass it');
    END IF;
    IF LENGTH(p_value) > {M["MAX_COMPONENT_CHARS"]} THEN
      fail('invalid_scope', p_what || ' is ' || LENGTH(p_value)
        || ' characters long; the limit is {M["MAX_COMPONENT_CHARS"]}: use a shorter identifier');
    END IF;
    FOR i IN 1 .. LENGTH(p_value) LOOP
      v_code := ASCII(SUBSTR(p_value, i, 1));
      IF NOT (v_code BETWEEN 48 AND 57 OR v_code BETWEEN 65 AND 90 OR v_code BETWEEN 97 AND 122
              OR v_code IN (95, 46, 45)) THEN
        fail('invalid_scope', p_what || ' ''' || SUBSTR(p_value, 1, 100) || ''' '
          || {_q(COMPONENT_RULE)});
      END IF;
    END LOOP;
    RETURN p_value;
  END component;

  -- dbmemory.sqlgen.api_common.PATH_RULE (a strict subset of what
  -- dbmemory.core.paths.normalize_path returns unchanged), on code values
  PROCEDURE check_path (p_path IN VARCHAR2) IS
    v_len   PLS_INTEGER;
    v_code  PLS_INTEGER;
    v_start PLS_INTEGER;
    v_seg   VARCHAR2(1000 CHAR);
    v_shown VARCHAR2(200 CHAR);
  BEGIN
    IF p_path IS NULL THEN
      fail('invalid_path', 'path is empty or NULL: pass a path such as ''{ROOT}/notes.md''');
    END IF;
    v_len := LENGTH(p_path);
    v_shown := '''' || SUBSTR(p_path, 1, 100) || '''' || CASE WHEN v_len > 100 THEN '...' END;
    IF v_len > {M["MAX_PATH_CHARS"]} THEN  -- dbmemory.core.paths.MAX_PATH_CHARS
      fail('invalid_path', 'path ' || v_shown || ' is ' || v_len
        || ' characters long; the limit is {M["MAX_PATH_CHARS"]:,} characters: use a shorter path');
    END IF;
    FOR i IN 1 .. v_len LOOP
      v_code := ASCII(SUBSTR(p_path, i, 1));
      IF v_code < 32 OR v_code > 126 THEN
        fail('invalid_path', 'path ' || v_shown || ' has a character that is not printable ASCII at position '
          || (i - 1) || ': ' || {_q(PATH_RULE)});
      ELSIF v_code = 92 THEN
        fail('invalid_path', 'path ' || v_shown || ' contains a backslash at position ' || (i - 1)
          || ': separate segments with ''/''');
      ELSIF v_code = 37 THEN
        fail('invalid_path', 'path ' || v_shown || ' contains ''%'' at position ' || (i - 1)
          || ': the Python rules decode percent-escapes, so write the characters themselves');
      END IF;
    END LOOP;
    IF same(p_path, '{ROOT}') THEN
      RETURN;
    END IF;
    IF NOT same(SUBSTR(p_path, 1, {len(ROOT) + 1}), '{ROOT}/') THEN
      fail('invalid_path', 'path ' || v_shown || ' must be {ROOT} or start with {ROOT}/: write it as ''{ROOT}/<name>''');
    END IF;
    v_start := {len(ROOT) + 2};
    FOR i IN {len(ROOT) + 2} .. v_len + 1 LOOP
      IF i > v_len OR ASCII(SUBSTR(p_path, i, 1)) = 47 THEN
        v_seg := SUBSTR(p_path, v_start, i - v_start);
        IF v_seg IS NULL THEN
          fail('invalid_path', 'path ' || v_shown || ' has an empty segment (''//'' or a trailing ''/''): remove it');
        ELSIF same(v_seg, '..') THEN
          fail('invalid_path', 'path ' || v_shown || ' must stay under {ROOT}: remove ''..'' segments');
        ELSIF same(v_seg, '.') THEN
          fail('invalid_path', 'path ' || v_shown || ' contains a ''.'' segment: remove it');
        ELSIF ASCII(SUBSTR(v_seg, 1, 1)) = 32 OR ASCII(SUBSTR(v_seg, -1, 1)) = 32 THEN
          fail('invalid_path', 'path ' || v_shown || ' has a segment that starts or ends with whitespace: remove the surrounding spaces');
        END IF;
        v_start := i + 1;
      END IF;
    END LOOP;
  END check_path;

  -- dbmemory.core.paths.path_hash: SHA-256 hex of the path's bytes (ASCII: the same in every
  -- database character set, so the same as Python's UTF-8)
  FUNCTION path_hash (p_path IN VARCHAR2) RETURN VARCHAR2 IS
    v_hash VARCHAR2(64);
  BEGIN
    SELECT LOWER(RAWTOHEX(STANDARD_HASH(p_path, 'SHA256'))) INTO v_hash FROM dual;
    RETURN v_hash;
  END path_hash;

  PROCEDURE check_store_id (p_store_id IN NUMBER) IS
  BEGIN
    IF p_store_id IS NULL OR p_store_id < 1 OR p_store_id <> TRUNC(p_store_id) THEN
      fail('invalid_argument', 'store_id must be a whole number from 1 to 2**63-1, got '
        || NVL(TO_CHAR(p_store_id), 'NULL') || ': look it up with {S}.resolve_store_id(...)');
    END IF;
  END check_store_id;

  -- dbmemory.core.keys.is_reserved_key (RESERVED_PREFIX): the reserved namespace is unreachable by
  -- store id too; lock_store checks the row it locks, check_reachable reads it for the readers
  PROCEDURE refuse_reserved (p_store_id IN NUMBER, p_key IN VARCHAR2) IS
  BEGIN
    IF same(SUBSTR(p_key, 1, {len(RESERVED_PREFIX)}), '{RESERVED_PREFIX}') THEN
      fail('invalid_scope', 'store ' || p_store_id || ' {RESERVED_STORE_RULE}');
    END IF;
  END refuse_reserved;

  -- callers bound to their stores: a user-scope store (user:<agent>:<user>) is reachable only
  -- when the session's user (set_user, package state g_user_id) is its user, unless the session
  -- user is the package's owner (CURRENT_USER inside this definer-rights package), who reads the
  -- tables directly anyway
  PROCEDURE check_identity (p_store_id IN NUMBER, p_key IN VARCHAR2) IS
  BEGIN
    -- a store id with no store (p_key NULL) answers a bound caller as another user's store
    -- does: walking ids tells nothing about who owns what
    IF p_key IS NULL AND p_store_id IS NULL THEN
      RETURN;
    END IF;
    IF p_key IS NOT NULL AND NOT same(SUBSTR(p_key, 1, 5), 'user:') THEN
      RETURN;
    END IF;
    IF SYS_CONTEXT('USERENV', 'SESSION_USER') = SYS_CONTEXT('USERENV', 'CURRENT_USER') THEN
      RETURN;
    END IF;
    IF p_key IS NULL OR g_user_id IS NULL
       OR NOT same(REGEXP_SUBSTR(p_key, '[^:]+', 1, 3), g_user_id) THEN
      fail('not_found', 'store ' || NVL(TO_CHAR(p_store_id), p_key)
        || ' does not exist or belongs to another user than this session''s {S}.set_user ('
        || NVL(g_user_id, 'not set') || '): call {S}.set_user with the user the request serves');
    END IF;
  END check_identity;

  -- the readers and expire_files: store_id checked, a reserved store refused (a missing one is
  -- left to the caller: no file, nothing to expire)
  PROCEDURE check_reachable (p_store_id IN NUMBER) IS
    v_key VARCHAR2(700 CHAR);
  BEGIN
    check_store_id(p_store_id);
    SELECT MAX(store_key) INTO v_key FROM dbm_stores WHERE store_id = p_store_id;
    refuse_reserved(p_store_id, v_key);
    check_identity(p_store_id, v_key);
  END check_reachable;

  -- characters of a text, as Python's len() (CLOB length; see docs/sql.md for characters
  -- outside the Basic Multilingual Plane)
  FUNCTION text_chars (p_text IN CLOB) RETURN NUMBER IS
  BEGIN
    RETURN NVL(DBMS_LOB.GETLENGTH(p_text), 0);
  END text_chars;

  -- ONE fragment: the cap checks (dbmemory.store.locks.check_file_chars, check_store_caps)
  -- from the locked store row's counters (revision 0004: file_count, total_chars), the
  -- store-row update of every write (dbmemory.store.statements.reads.ADJUST_STORE) and the store lock.
  -- p_old_chars NULL: a new file (one file more).
  PROCEDURE check_caps (p_path IN VARCHAR2, p_max_file_chars IN NUMBER,
                        p_max_files IN NUMBER, p_max_store_chars IN NUMBER,
                        p_file_count IN NUMBER, p_total_chars IN NUMBER,
                        p_new_chars IN NUMBER, p_old_chars IN NUMBER) IS
    v_add_files NUMBER := CASE WHEN p_old_chars IS NULL THEN 1 ELSE 0 END;
    v_add_chars NUMBER := p_new_chars - NVL(p_old_chars, 0);
  BEGIN
    IF p_new_chars > p_max_file_chars AND (p_old_chars IS NULL OR p_new_chars > p_old_chars) THEN
      fail('cap_exceeded', 'file text would be ' || p_new_chars
        || ' characters, over the cap max_file_chars = ' || p_max_file_chars
        || ': keep files small - split it, or merge and delete old content');
    END IF;
    IF v_add_files > 0 AND p_file_count + v_add_files > p_max_files THEN
      fail('cap_exceeded', 'cannot create ' || p_path || ': the store already holds ' || p_file_count
        || ' files and the cap max_files is ' || p_max_files
        || ': merge related files or delete ones you no longer need, then retry');
    END IF;
    IF p_max_store_chars IS NOT NULL AND v_add_chars > 0
       AND p_total_chars + v_add_chars > p_max_store_chars THEN
      fail('cap_exceeded', 'writing ' || p_path || ' would bring the store to ' || (p_total_chars + v_add_chars)
        || ' characters, over the cap max_store_chars = ' || p_max_store_chars
        || ': condense or delete old files, then retry');
    END IF;
  END check_caps;

  PROCEDURE store_row_update (p_store_id IN NUMBER, p_add_files IN NUMBER,
                              p_add_chars IN NUMBER, p_now IN TIMESTAMP) IS
  BEGIN
    -- dbmemory.store.statements.reads.ADJUST_STORE, under the store lock the writer holds
    UPDATE dbm_stores
       SET file_count = file_count + p_add_files, total_chars = total_chars + p_add_chars,
           updated_at = p_now
     WHERE store_id = p_store_id;
  END store_row_update;

  -- the writers' lock order (dbmemory.store.locks): the store row first, then file rows; the
  -- counters are exact under this lock
  PROCEDURE lock_store (p_store_id IN NUMBER, p_key OUT VARCHAR2, p_mfc OUT NUMBER,
                        p_mf OUT NUMBER, p_msc OUT NUMBER, p_nfiles OUT NUMBER,
                        p_nchars OUT NUMBER) IS
  BEGIN
    SELECT store_key, max_file_chars, max_files, max_store_chars, file_count, total_chars
      INTO p_key, p_mfc, p_mf, p_msc, p_nfiles, p_nchars
      FROM dbm_stores WHERE store_id = p_store_id FOR UPDATE;
    refuse_reserved(p_store_id, p_key);  -- before any write
    check_identity(p_store_id, p_key);
  EXCEPTION
    WHEN NO_DATA_FOUND THEN
      check_identity(p_store_id, NULL);  -- a bound caller: another user's answer
      fail('not_found', 'store ' || p_store_id || ' does not exist: check the store id');
  END lock_store;

  -- 1 when a file lies under p_path/ (it is a directory), else 0: the range probe of
  -- ix_dbm_files_prefix (dbmemory.db.dialect.types.PathKey: the column itself on Oracle) when the
  -- session compares in binary (NLS_COMP = BINARY: '>=' and '<' in code-point order) and the
  -- prefix fits the key ({PATH_KEY_CHARS} characters), then the exact SUBSTR test; the scan
  -- form otherwise (an APEX session with NLS_COMP = LINGUISTIC orders linguistically)
  FUNCTION files_under (p_store_id IN NUMBER, p_path IN VARCHAR2) RETURN NUMBER IS
    v_comp VARCHAR2(64);
    v_n    NUMBER;
  BEGIN
    SELECT MAX(value) INTO v_comp FROM nls_session_parameters WHERE parameter = 'NLS_COMP';
    IF NVL(v_comp, 'BINARY') = 'BINARY' AND LENGTH(p_path) + 1 <= {PATH_KEY_CHARS} THEN
      SELECT COUNT(*) INTO v_n FROM dbm_files
       WHERE store_id = p_store_id
         AND file_path >= p_path || '/' AND file_path < p_path || '0'
         AND SUBSTR(file_path, 1, LENGTH(p_path) + 1) = p_path || '/'
         AND ROWNUM = 1;
    ELSE
      SELECT COUNT(*) INTO v_n FROM dbm_files
       WHERE store_id = p_store_id
         AND SUBSTR(file_path, 1, LENGTH(p_path) + 1) = p_path || '/'
         AND ROWNUM = 1;
    END IF;
    RETURN v_n;
  END files_under;
"""
