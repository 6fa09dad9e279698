"""MySQL/MariaDB API, the file calls: ``list_files``, ``get_file``, ``put_file``, ``delete_file``
and ``clear_store_files`` (mirroring :mod:`dbmemory.store.reads`, :mod:`dbmemory.store.files`
and :mod:`dbmemory.store.moves`), for :mod:`dbmemory.sqlgen.mysql.api`."""

from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.db.dialect.types import PATH_KEY_CHARS
from dbmemory.sqlgen.api_common import ADMIN_ACTOR, MAX_ACTOR_CHARS
from dbmemory.sqlgen.mysql.rules import BIN, HANDLER, NUMBER, P, U, audit, lock_store

__all__ = [
    "LIST",
    "GET",
    "PUT",
    "DELETE",
    "CLEAR",
]


LIST = f"""CREATE PROCEDURE {P}list_files(IN p_store_id {NUMBER})
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.reads.list_files: every file without its text, by path in code-point order
    CALL {P}_check_reachable(p_store_id);
    IF NOT EXISTS (SELECT 1 FROM dbm_stores WHERE store_id = p_store_id) THEN  -- not an empty store
        CALL {P}_fail('not_found', CONCAT('store ', CAST(p_store_id AS SIGNED), ' does not exist: check the store id'));
    END IF;
    SELECT file_path AS path, char_count AS chars, version_no AS version,
           created_at, updated_at, last_accessed_at
      FROM dbm_files WHERE store_id = p_store_id
     ORDER BY CAST(file_path AS BINARY);
END"""


GET = f"""CREATE FUNCTION {P}get_file(p_store_id {NUMBER}, p_path LONGTEXT {U})
    RETURNS LONGTEXT {U}
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.reads.get_file (touch=False): the text, '' for an empty file
    DECLARE v_id BIGINT;
    DECLARE v_body LONGTEXT {U};
    CALL {P}_check_reachable(p_store_id);
    CALL {P}_check_path(p_path);
    SELECT file_id, body INTO v_id, v_body FROM dbm_files
     WHERE store_id = p_store_id AND path_hash = SHA2(p_path, 256);
    IF v_id IS NULL THEN
        -- a missing store is not a missing path (the writers' text: dbmemory.store.reads)
        IF NOT EXISTS (SELECT 1 FROM dbm_stores WHERE store_id = p_store_id) THEN
            CALL {P}_fail('not_found', CONCAT('store ', CAST(p_store_id AS SIGNED), ' does not exist: check the store id'));
        END IF;
        CALL {P}_fail('not_found', CONCAT('the path ', p_path, ' does not exist'));
    END IF;
    RETURN COALESCE(v_body, '');
END"""


_DIR_EXACT = (
    "CAST(SUBSTRING(file_path, 1, CHAR_LENGTH(p_path) + 1) AS BINARY)"
    " = CAST(CONCAT(p_path, '/') AS BINARY)"
)


_DIR_PROBE = f"""-- files under p_path/ (it is a directory): the range probe of ix_dbm_files_prefix
            -- (dbmemory.db.dialect.types.PathKey: the utf8mb4_bin column) when the prefix fits the key
            -- ({PATH_KEY_CHARS} characters), then the exact test; the scan form otherwise
            IF CHAR_LENGTH(p_path) + 1 <= {PATH_KEY_CHARS} THEN
                SELECT COUNT(*) INTO v_bad FROM dbm_files WHERE store_id = p_store_id
                   AND file_path >= CONCAT(p_path, '/') {BIN}
                   AND file_path < CONCAT(p_path, '0') {BIN}
                   AND {_DIR_EXACT}
                 LOCK IN SHARE MODE;
            ELSE
                SELECT COUNT(*) INTO v_bad FROM dbm_files WHERE store_id = p_store_id
                   AND {_DIR_EXACT}
                 LOCK IN SHARE MODE;
            END IF;"""


PUT = f"""CREATE PROCEDURE {P}put_file(
    IN p_store_id {NUMBER}, IN p_path LONGTEXT {U}, IN p_text LONGTEXT {U}, IN p_actor TEXT {U},
    OUT p_version INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.files.put_file (enforce_caps, no expected version, expiry flag kept): create or
    -- replace; p_version = the file's version after the write; p_actor NULL = '{ADMIN_ACTOR}'
    DECLARE v_key VARCHAR(700) {U};
    DECLARE v_mfc INT;
    DECLARE v_mf INT;
    DECLARE v_msc BIGINT;
    DECLARE v_nfiles BIGINT;
    DECLARE v_nchars BIGINT;
    DECLARE v_hash CHAR(64);
    DECLARE v_fid BIGINT;
    DECLARE v_old BIGINT;
    DECLARE v_ver INT;
    DECLARE v_body LONGTEXT {U};
    DECLARE v_chars BIGINT;
    DECLARE v_bad BIGINT;
    DECLARE v_errno INT;
    DECLARE i INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_actor TEXT {U} DEFAULT COALESCE(p_actor, '{ADMIN_ACTOR}');
    CALL {P}_check_store_id(p_store_id);
    CALL {P}_check_path(p_path);
    IF CAST(p_path AS BINARY) = CAST('{ROOT}' AS BINARY) THEN
        CALL {P}_fail('invalid_path', 'cannot write the memory root {ROOT}: name a file or directory inside it');
    END IF;
    IF p_text IS NULL THEN
        CALL {P}_fail('invalid_argument', 'file text must be text, got NULL: pass '''' for an empty file');
    END IF;
    IF LOCATE(CHAR(0), p_text) > 0 THEN
        CALL {P}_fail('invalid_argument', 'file text contains a NUL character (U+0000), which cannot be stored: remove it');
    END IF;
    CALL {P}_need_transaction();
    SET v_hash = SHA2(p_path, 256);
    SET v_chars = CHAR_LENGTH(p_text);
    SAVEPOINT {P}write;
    BEGIN
        {HANDLER}
        {lock_store("v_key", True)}
        SELECT file_id, char_count, version_no, body INTO v_fid, v_old, v_ver, v_body
          FROM dbm_files WHERE store_id = p_store_id AND path_hash = v_hash FOR UPDATE;
        IF v_fid IS NULL THEN
            IF v_chars > v_mfc THEN
                CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, NULL);
            END IF;
            -- dbmemory.store.locks.check_new_file_shape
            SET i = {len(ROOT) + 2};
            WHILE i <= CHAR_LENGTH(p_path) DO
                IF ORD(SUBSTRING(p_path, i, 1)) = 47 THEN
                    SELECT COUNT(*) INTO v_bad FROM dbm_files
                     WHERE store_id = p_store_id AND path_hash = SHA2(SUBSTRING(p_path, 1, i - 1), 256)
                     LOCK IN SHARE MODE;
                    IF v_bad > 0 THEN
                        CALL {P}_fail('invalid_path', CONCAT('cannot use ', p_path,
                            ': a file exists where one of its parent directories would be; a path cannot be a file and a directory at once: choose another path'));
                    END IF;
                END IF;
                SET i = i + 1;
            END WHILE;
            {_DIR_PROBE}
            IF v_bad > 0 THEN
                CALL {P}_fail('invalid_path', CONCAT(p_path, ' is a directory: choose a file path inside it or another name'));
            END IF;
            CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, NULL);
            INSERT INTO dbm_files
                (store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,
                 created_at, updated_at, last_accessed_at)
            VALUES (p_store_id, p_path, v_hash, NULLIF(p_text, ''), v_chars, 1, 0,
                    v_now, v_now, v_now);
            CALL {P}_store_row_update(p_store_id, 1, v_chars, v_now);
            {audit("p_store_id", "v_key", "p_path", "put", "v_actor", "NULL", "v_chars", "NULL", "v_now")};
            SET p_version = 1;
        ELSEIF v_old = v_chars AND CAST(COALESCE(v_body, '') AS BINARY) = CAST(p_text AS BINARY) THEN
            SET p_version = v_ver;  -- unchanged: nothing written, no audit event
        ELSE
            CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, v_chars, v_old);
            UPDATE dbm_files
               SET body = NULLIF(p_text, ''), char_count = v_chars, version_no = v_ver + 1,
                   updated_at = v_now, last_accessed_at = v_now
             WHERE store_id = p_store_id AND file_id = v_fid;
            CALL {P}_store_row_update(p_store_id, 0, v_chars - v_old, v_now);
            {audit("p_store_id", "v_key", "p_path", "put", "v_actor", "v_old", "v_chars", "NULL", "v_now")};
            SET p_version = v_ver + 1;
        END IF;
    END;
END"""


DELETE = f"""CREATE PROCEDURE {P}delete_file(
    IN p_store_id {NUMBER}, IN p_path LONGTEXT {U}, IN p_actor TEXT {U}, OUT p_deleted BOOLEAN)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.moves.delete_file: p_deleted = TRUE when the file existed; p_actor NULL = '{ADMIN_ACTOR}'
    DECLARE v_key VARCHAR(700) {U};
    DECLARE v_fid BIGINT;
    DECLARE v_old BIGINT;
    DECLARE v_bad BIGINT;
    DECLARE v_errno INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_actor TEXT {U} DEFAULT COALESCE(p_actor, '{ADMIN_ACTOR}');
    CALL {P}_check_store_id(p_store_id);
    CALL {P}_check_path(p_path);
    IF CAST(p_path AS BINARY) = CAST('{ROOT}' AS BINARY) THEN
        CALL {P}_fail('invalid_path', 'cannot delete the memory root {ROOT}: name a file or directory inside it');
    END IF;
    CALL {P}_need_transaction();
    SAVEPOINT {P}write;
    BEGIN
        {HANDLER}
        {lock_store("v_key", False)}
        SELECT file_id, char_count INTO v_fid, v_old FROM dbm_files
         WHERE store_id = p_store_id AND path_hash = SHA2(p_path, 256) FOR UPDATE;
        IF v_fid IS NULL THEN
            {_DIR_PROBE}
            IF v_bad > 0 THEN
                CALL {P}_fail('invalid_path', CONCAT(p_path, ' is a directory, not a file: delete_file deletes one file'));
            END IF;
            SET p_deleted = FALSE;
        ELSE
            DELETE FROM dbm_files WHERE store_id = p_store_id AND file_id = v_fid;
            CALL {P}_store_row_update(p_store_id, -1, -v_old, v_now);
            {audit("p_store_id", "v_key", "p_path", "delete", "v_actor", "v_old", "NULL", "NULL", "v_now")};
            SET p_deleted = TRUE;
        END IF;
    END;
END"""


CLEAR = f"""CREATE PROCEDURE {P}clear_store_files(
    IN p_store_id {NUMBER}, IN p_actor TEXT {U}, OUT p_count INT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.moves.clear_store_files: every file deleted, one 'clear' event each
    DECLARE v_key VARCHAR(700) {U};
    DECLARE v_chars BIGINT;
    DECLARE v_errno INT;
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_actor TEXT {U} DEFAULT COALESCE(p_actor, '{ADMIN_ACTOR}');
    CALL {P}_check_store_id(p_store_id);
    CALL {P}_need_transaction();
    SAVEPOINT {P}write;
    BEGIN
        {HANDLER}
        {lock_store("v_key", False)}
        INSERT INTO dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        SELECT p_store_id, v_key, file_path, 'clear',
               LEFT(COALESCE(NULLIF(v_actor, ''), 'unknown'), {MAX_ACTOR_CHARS}),
               char_count, NULL, NULL, v_now
          FROM dbm_files WHERE store_id = p_store_id ORDER BY CAST(file_path AS BINARY)
          LOCK IN SHARE MODE;
        SET p_count = ROW_COUNT();
        SELECT COALESCE(SUM(char_count), 0) INTO v_chars FROM dbm_files WHERE store_id = p_store_id
          LOCK IN SHARE MODE;
        DELETE FROM dbm_files WHERE store_id = p_store_id;
        IF p_count > 0 THEN
            CALL {P}_store_row_update(p_store_id, -p_count, -v_chars, v_now);
        END IF;
    END;
END"""
