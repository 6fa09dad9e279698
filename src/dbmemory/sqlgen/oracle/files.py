"""Oracle API, the file calls of the package body: ``list_files``, ``get_file``, ``put_file``,
``delete_file`` and ``clear_store_files`` (mirroring :mod:`dbmemory.store.reads`,
:mod:`dbmemory.store.files` and :mod:`dbmemory.store.moves`), for :mod:`dbmemory.sqlgen.oracle.api`."""

from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.sqlgen.api_common import ADMIN_ACTOR
from dbmemory.sqlgen.oracle.rules import DIR_PROBE, audit

__all__ = [
    "FILES",
]


FILES = f"""  FUNCTION list_files (p_store_id IN NUMBER) RETURN t_file_infos PIPELINED IS
    -- dbmemory.store.reads.list_files: every file without its text, by path in code-point order
    v_row t_file_info;
    v_stores NUMBER;
  BEGIN
    check_reachable(p_store_id);
    SELECT COUNT(*) INTO v_stores FROM dbm_stores WHERE store_id = p_store_id;
    IF v_stores = 0 THEN  -- a missing store is not an empty one
      fail('not_found', 'store ' || p_store_id || ' does not exist: check the store id');
    END IF;
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
    -- dbmemory.store.reads.get_file (touch=False): the text; an empty file is NULL ('' on Oracle)
    v_body CLOB;
    v_hash VARCHAR2(64);
    v_stores NUMBER;
  BEGIN
    check_reachable(p_store_id);
    check_path(p_path);
    v_hash := path_hash(p_path);
    SELECT body INTO v_body FROM dbm_files
     WHERE store_id = p_store_id AND path_hash = v_hash;
    RETURN v_body;
  EXCEPTION
    WHEN NO_DATA_FOUND THEN
      -- a missing store is not a missing path (the writers' text: dbmemory.store.reads)
      SELECT COUNT(*) INTO v_stores FROM dbm_stores WHERE store_id = p_store_id;
      IF v_stores = 0 THEN
        fail('not_found', 'store ' || p_store_id || ' does not exist: check the store id');
      END IF;
      fail('not_found', 'the path ' || p_path || ' does not exist');
  END get_file;

  FUNCTION put_file_n (p_store_id IN NUMBER, p_path IN VARCHAR2, p_text IN CLOB,
                     p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER IS
    -- dbmemory.store.files.put_file (enforce_caps, no expected version, expiry flag kept): create or
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
      -- dbmemory.store.locks.check_new_file_shape
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
      {DIR_PROBE};
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
      {audit("p_store_id", "v_key", "p_path", "put", "p_actor", "NULL", "v_chars", "NULL")};
      RETURN 1;
    END IF;
    IF v_old = v_chars AND (v_chars = 0 OR DBMS_LOB.COMPARE(v_body, p_text) = 0) THEN
      RETURN v_ver;  -- unchanged: nothing written, no audit event
    END IF;
    check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, v_old);
    UPDATE dbm_files
       SET body = v_new, char_count = v_chars,
           version_no = v_ver + 1, updated_at = v_now, last_accessed_at = v_now
     WHERE store_id = p_store_id AND file_id = v_fid;
    store_row_update(p_store_id, 0, v_chars - v_old, v_now);
    {audit("p_store_id", "v_key", "p_path", "put", "p_actor", "v_old", "v_chars", "NULL")};
    RETURN v_ver + 1;
  END put_file_n;

  FUNCTION delete_file_n (p_store_id IN NUMBER, p_path IN VARCHAR2,
                        p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER IS
    -- dbmemory.store.moves.delete_file: 1 when the file existed, 0 when nothing was there
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
      {DIR_PROBE};
      IF v_bad > 0 THEN
        fail('invalid_path', p_path || ' is a directory, not a file: delete_file deletes one file');
      END IF;
      RETURN 0;
    END IF;
    DELETE FROM dbm_files WHERE store_id = p_store_id AND file_id = v_fid;
    store_row_update(p_store_id, -1, -v_old, v_now);
    {audit("p_store_id", "v_key", "p_path", "delete", "p_actor", "v_old", "NULL", "NULL")};
    RETURN 1;
  END delete_file_n;

  FUNCTION clear_store_files_n (p_store_id IN NUMBER,
                              p_actor IN VARCHAR2 DEFAULT '{ADMIN_ACTOR}') RETURN NUMBER IS
    -- dbmemory.store.moves.clear_store_files: every file deleted, one 'clear' event each
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
      DELETE FROM dbm_files WHERE store_id = p_store_id AND file_id = f.file_id;
      {audit("p_store_id", "v_key", "f.file_path", "clear", "p_actor", "f.char_count", "NULL", "NULL")};
      v_count := v_count + 1;
      v_chars := v_chars + f.char_count;
    END LOOP;
    IF v_count > 0 THEN
      store_row_update(p_store_id, -v_count, -v_chars, v_now);
    END IF;
    RETURN v_count;
  END clear_store_files_n;

"""
"""The package body's file functions, each followed by a blank line (the body drops blank lines)."""
