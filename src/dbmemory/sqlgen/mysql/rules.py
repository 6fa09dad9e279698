"""MySQL/MariaDB API, the shared rules: errors, the transaction check, key components, the path
subset, audit rows, the caps fragment and the store lock (:mod:`dbmemory.sqlgen.mysql.api`)."""

from __future__ import annotations

from dbmemory.core.keys import SCOPES
from dbmemory.core.paths import ROOT
from dbmemory.sqlgen.api_common import (
    API_ERRORS,
    API_NAME,
    COMPONENT_RULE,
    MAX_ACTOR_CHARS,
    MAX_DETAIL_CHARS,
    PATH_RULE,
    RESERVED_PREFIX,
    RESERVED_STORE_RULE,
)
from dbmemory.sqlgen.api_common import (
    MIRRORED as M,
)

__all__ = [
    "P",
    "BIN",
    "q",
    "U",
    "FAIL",
    "NEED_TRX",
    "COMPONENT",
    "PATH",
    "CHECK_ID",
    "MYSQL_AUTOCOMMIT_RULE",
    "NUMBER",
    "shown",
    "RESERVED_CHECK",
    "IDENTITY_VARIABLE",
    "IDENTITY",
    "audit",
    "CAPS_AND_STORE_ROW",
    "HANDLER",
    "lock_store",
]


P = API_NAME + "_"
_SCOPES_SQL = ", ".join(f"'{s}'" for s in SCOPES)
BIN = "COLLATE utf8mb4_bin"


def q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


U = "CHARACTER SET utf8mb4"

FAIL = f"""CREATE PROCEDURE {P}_fail(IN p_code VARCHAR(30), IN p_message TEXT {U})
    NO SQL SQL SECURITY DEFINER
BEGIN
    -- MYSQL_ERRNOs of dbmemory.sqlgen.api_common.API_ERRORS
    DECLARE v_errno INT DEFAULT CASE p_code
{chr(10).join(f"        WHEN '{e.name}' THEN {e.number}" for e in API_ERRORS)}
        ELSE 20703 END;
    -- MariaDB keeps 512 characters of a message, MySQL 128
    DECLARE v_text VARCHAR(512) {U} DEFAULT
        LEFT(CONCAT(p_code, ': ', p_message), IF(VERSION() LIKE '%MariaDB%', 512, 128));
    SIGNAL SQLSTATE '45000' SET MYSQL_ERRNO = v_errno, MESSAGE_TEXT = v_text;
END"""

MYSQL_AUTOCOMMIT_RULE = (
    "on MySQL call the writing routines with SET autocommit = 0, then COMMIT: MySQL shows a "
    "routine no open START TRANSACTION, and with autocommit on each statement would commit on its own"
)
"""The MySQL 8 refusal of a writer called with autocommit on (MariaDB tells an open transaction
apart with ``@@in_transaction`` and refuses only a bare autocommit call)."""

NEED_TRX = f"""CREATE PROCEDURE {P}_need_transaction()
    NO SQL SQL SECURITY DEFINER
BEGIN
    -- with autocommit on and no transaction open, every statement would commit on its own and
    -- the store lock would not last: refuse (no routine of the API commits)
    IF @@autocommit = 1 AND VERSION() LIKE '%MariaDB%' THEN
        PREPARE dbm_memory_trx FROM 'SELECT @@in_transaction INTO @dbm_memory_in_trx';
        EXECUTE dbm_memory_trx;
        DEALLOCATE PREPARE dbm_memory_trx;
        IF @dbm_memory_in_trx = 0 THEN
            CALL {P}_fail('invalid_argument',
                'call the writing routines inside a transaction: START TRANSACTION, CALL ..., COMMIT (or SET autocommit = 0)');
        END IF;
    ELSEIF @@autocommit = 1 THEN
        -- MySQL 8 has no transaction-state variable: a routine cannot tell START TRANSACTION from a bare
        -- autocommit call, so it asks for autocommit off (stricter, never unsafe)
        CALL {P}_fail('invalid_argument',
            '{MYSQL_AUTOCOMMIT_RULE}');
    END IF;
END"""

# dbmemory.core.keys.validate_component (MAX_COMPONENT_CHARS, [A-Za-z0-9_.-]), checked on code points
COMPONENT = f"""CREATE PROCEDURE {P}_check_component(
    IN p_value TEXT {U}, IN p_what VARCHAR(100), IN p_scope TEXT {U})
    NO SQL SQL SECURITY DEFINER
BEGIN
    DECLARE i INT DEFAULT 1;
    DECLARE v_code INT;
    IF p_value IS NULL THEN
        CALL {P}_fail('missing_context_key', CONCAT('scope ', QUOTE(p_scope), ' needs ', p_what, ': pass it'));
    END IF;
    IF p_value = '' THEN
        CALL {P}_fail('invalid_scope', CONCAT(p_what, ' is empty: pass 1 to {M["MAX_COMPONENT_CHARS"]} characters'));
    END IF;
    IF CHAR_LENGTH(p_value) > {M["MAX_COMPONENT_CHARS"]} THEN  -- dbmemory.core.keys.MAX_COMPONENT_CHARS
        CALL {P}_fail('invalid_scope', CONCAT(p_what, ' is ', CHAR_LENGTH(p_value),
            ' characters long; the limit is {M["MAX_COMPONENT_CHARS"]}: use a shorter identifier'));
    END IF;
    WHILE i <= CHAR_LENGTH(p_value) DO
        SET v_code = ORD(CONVERT(SUBSTRING(p_value, i, 1) USING utf32));
        IF NOT (v_code BETWEEN 48 AND 57 OR v_code BETWEEN 65 AND 90 OR v_code BETWEEN 97 AND 122
                OR v_code IN (95, 46, 45)) THEN
            CALL {P}_fail('invalid_scope', CONCAT(p_what, ' ', QUOTE(LEFT(p_value, 100)),
                ' {COMPONENT_RULE.replace(chr(39), chr(39) * 2)}'));
        END IF;
        SET i = i + 1;
    END WHILE;
END"""

PATH = f"""CREATE PROCEDURE {P}_check_path(IN p_path LONGTEXT {U})
    NO SQL SQL SECURITY DEFINER
BEGIN
    -- dbmemory.sqlgen.api_common.PATH_RULE (a strict subset of what
    -- dbmemory.core.paths.normalize_path returns unchanged), checked on code points
    DECLARE i INT DEFAULT 1;
    DECLARE v_len INT;
    DECLARE v_code INT;
    DECLARE v_start INT;
    DECLARE v_seg TEXT {U};
    DECLARE v_shown TEXT {U};
    IF p_path IS NULL OR p_path = '' THEN
        CALL {P}_fail('invalid_path', 'path is empty or NULL: pass a path such as ''{ROOT}/notes.md''');
    END IF;
    SET v_len = CHAR_LENGTH(p_path);
    SET v_shown = CONCAT(QUOTE(LEFT(p_path, 100)), IF(v_len > 100, '...', ''));
    IF v_len > {M["MAX_PATH_CHARS"]} THEN  -- dbmemory.core.paths.MAX_PATH_CHARS
        CALL {P}_fail('invalid_path', CONCAT('path ', v_shown, ' is ', v_len,
            ' characters long; the limit is {M["MAX_PATH_CHARS"]:,} characters: use a shorter path'));
    END IF;
    WHILE i <= v_len DO
        SET v_code = ORD(CONVERT(SUBSTRING(p_path, i, 1) USING utf32));
        IF v_code < 32 OR v_code > 126 THEN
            CALL {P}_fail('invalid_path', CONCAT('path ', v_shown, ' has U+', IF(v_code < 4096, LPAD(HEX(v_code), 4, '0'), HEX(v_code)),
                ' at position ', i - 1, ': ', {q(PATH_RULE)}));
        END IF;
        IF v_code = 92 THEN
            CALL {P}_fail('invalid_path', CONCAT('path ', v_shown, ' contains a backslash at position ',
                i - 1, ': separate segments with ''/'''));
        END IF;
        IF v_code = 37 THEN
            CALL {P}_fail('invalid_path', CONCAT('path ', v_shown, ' contains ''%'' at position ', i - 1,
                ': the Python rules decode percent-escapes, so write the characters themselves'));
        END IF;
        SET i = i + 1;
    END WHILE;
    IF CAST(p_path AS BINARY) <> CAST('{ROOT}' AS BINARY) THEN
        IF CAST(SUBSTRING(p_path, 1, {len(ROOT) + 1}) AS BINARY) <> CAST('{ROOT}/' AS BINARY) THEN
            CALL {P}_fail('invalid_path', CONCAT('path ', v_shown,
                ' must be {ROOT} or start with {ROOT}/: write it as ''{ROOT}/<name>'''));
        END IF;
        SET v_start = {len(ROOT) + 2};
        SET i = {len(ROOT) + 2};
        WHILE i <= v_len + 1 DO
            IF i > v_len OR ORD(SUBSTRING(p_path, i, 1)) = 47 THEN
                SET v_seg = SUBSTRING(p_path, v_start, i - v_start);
                IF CHAR_LENGTH(v_seg) = 0 THEN
                    CALL {P}_fail('invalid_path', CONCAT('path ', v_shown,
                        ' has an empty segment (''//'' or a trailing ''/''): remove it'));
                END IF;
                IF CAST(v_seg AS BINARY) = CAST('..' AS BINARY) THEN
                    CALL {P}_fail('invalid_path', CONCAT('path ', v_shown, ' must stay under {ROOT}: remove ''..'' segments'));
                END IF;
                IF CAST(v_seg AS BINARY) = CAST('.' AS BINARY) THEN
                    CALL {P}_fail('invalid_path', CONCAT('path ', v_shown, ' contains a ''.'' segment: remove it'));
                END IF;
                IF ORD(LEFT(v_seg, 1)) = 32 OR ORD(RIGHT(v_seg, 1)) = 32 THEN
                    CALL {P}_fail('invalid_path', CONCAT('path ', v_shown, ' has a segment ', QUOTE(v_seg),
                        ' that starts or ends with whitespace: remove the surrounding spaces'));
                END IF;
                SET v_start = i + 1;
            END IF;
            SET i = i + 1;
        END WHILE;
    END IF;
END"""

NUMBER = "DECIMAL(65, 30)"
"""The type of the whole-number parameters (store ids, caps): a BIGINT parameter would round
5.6 to 6 before the routine sees it (a write in the neighbouring store), so they arrive as
decimals and :func:`shown` / ``FLOOR`` refuse fractions (up to 30 decimal places)."""


def shown(expr: str) -> str:
    """``expr`` (a :data:`NUMBER`) as text without trailing zeros: ``5.6``, ``6``."""
    return (f"IF({expr} = FLOOR({expr}), CAST(CAST({expr} AS DECIMAL(65, 0)) AS CHAR), "
            f"TRIM(TRAILING '0' FROM CAST({expr} AS CHAR)))")


CHECK_ID = f"""CREATE PROCEDURE {P}_check_store_id(IN p_store_id {NUMBER})
    NO SQL SQL SECURITY DEFINER
BEGIN
    IF p_store_id IS NULL OR p_store_id < 1 OR p_store_id <> FLOOR(p_store_id)
       OR p_store_id > {M["INT64_MAX"]} THEN
        CALL {P}_fail('invalid_argument', CONCAT('store_id must be a whole number from 1 to 2**63-1, got ',
            COALESCE({shown("p_store_id")}, 'NULL'), ': look it up with {P}resolve_store_id(...)'));
    END IF;
END"""


# dbmemory.core.keys.is_reserved_key (RESERVED_PREFIX): the reserved namespace is unreachable by
# store id too; lock_store checks the row it locks, _check_reachable reads it for the readers
RESERVED_CHECK = [
    f"""CREATE PROCEDURE {P}_refuse_reserved(IN p_store_id BIGINT, IN p_store_key VARCHAR(700) {U})
    NO SQL SQL SECURITY DEFINER
BEGIN
    IF CAST(LEFT(p_store_key, {len(RESERVED_PREFIX)}) AS BINARY) = CAST('{RESERVED_PREFIX}' AS BINARY) THEN
        CALL {P}_fail('invalid_scope', CONCAT('store ', p_store_id, ' {RESERVED_STORE_RULE}'));
    END IF;
END""",
    f"""CREATE PROCEDURE {P}_check_reachable(IN p_store_id {NUMBER})
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- the readers and expire_files: store_id checked, a reserved store refused (a missing one
    -- is left to the caller: no file, nothing to expire)
    DECLARE v_key VARCHAR(700) {U};
    CALL {P}_check_store_id(p_store_id);
    SET v_key = (SELECT store_key FROM dbm_stores WHERE store_id = p_store_id);
    CALL {P}_refuse_reserved(p_store_id, v_key);
    CALL {P}_check_identity(p_store_id, v_key);
END""",
]


IDENTITY_VARIABLE = "@dbm_memory_user_id"
"""The session's user variable that names the user a request serves (``SET @dbm_memory_user_id
= 'alice'``): MariaDB/MySQL's name for PostgreSQL's setting ``dbm_memory.user_id``. A definer
routine reads the calling session's user variables."""


# callers bound to their stores: a user-scope store (user:<agent>:<user>) is reachable only when
# the session's @dbm_memory_user_id is its user, whoever calls. No login is exempt: inside a
# definer routine CURRENT_USER() is the definer, and USER() is the name the client sent (an
# anonymous account's login may send any name), so a routine cannot tell who authenticated; the
# owner and the installer read the tables directly, or name the user like any caller
IDENTITY = f"""CREATE PROCEDURE {P}_check_identity(IN p_store_id BIGINT, IN p_store_key VARCHAR(1000) {U})
    NO SQL SQL SECURITY DEFINER
BEGIN
    DECLARE v_user TEXT {U} DEFAULT CAST({IDENTITY_VARIABLE} AS CHAR CHARACTER SET utf8mb4);
    -- a store id with no store (p_store_key NULL) answers as another user's store does: walking
    -- ids tells nothing about who owns what
    IF (p_store_key IS NULL AND p_store_id IS NOT NULL)
       OR (p_store_key IS NOT NULL AND CAST(LEFT(p_store_key, 5) AS BINARY) = CAST('user:' AS BINARY)
       AND (v_user IS NULL OR v_user = ''
            OR CAST(SUBSTRING_INDEX(SUBSTRING_INDEX(p_store_key, ':', 3), ':', -1) AS BINARY)
               <> CAST(v_user AS BINARY))) THEN
        CALL {P}_fail('not_found', CONCAT('store ', COALESCE(p_store_id, p_store_key),
            ' does not exist or belongs to another user than this session''s {IDENTITY_VARIABLE} (',
            COALESCE(NULLIF(v_user, ''), 'not set'),
            '): set {IDENTITY_VARIABLE} to the user the request serves'));
    END IF;
END"""


def audit(store_id: str, key: str, path: str, action: str, actor: str, before: str,
           after: str, detail: str, now: str) -> str:
    """dbmemory.store.audit._audit_rows: actor cut at 500 ('' -> 'unknown'), detail cut at 1,000."""
    return f"""INSERT INTO dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        VALUES ({store_id}, {key}, {path}, '{action}',
                LEFT(COALESCE(NULLIF({actor}, ''), 'unknown'), {MAX_ACTOR_CHARS}),
                {before}, {after}, NULLIF(LEFT({detail}, {MAX_DETAIL_CHARS}), ''), {now})"""


# ONE fragment: the cap checks (dbmemory.store.locks.check_file_chars, check_store_caps) and
# the store-row update of every write (dbmemory.store.audit.audit_write: on MySQL/MariaDB the row is
# not modified, dbmemory.db.dialect.writes.store_bump is None).
# ONE fragment: the cap checks (dbmemory.store.locks.check_file_chars, check_store_caps) from
# the locked store row's counters (revision 0004: file_count, total_chars) and the store-row
# update of every write (dbmemory.store.statements.reads.ADJUST_STORE).
CAPS_AND_STORE_ROW = [
    f"""CREATE PROCEDURE {P}_check_caps(
    IN p_path LONGTEXT {U}, IN p_max_file_chars INT, IN p_max_files INT,
    IN p_max_store_chars BIGINT, IN p_file_count BIGINT, IN p_total_chars BIGINT,
    IN p_new_chars BIGINT, IN p_old_chars BIGINT)
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- p_old_chars NULL: a new file (one file more); the counters are the locked row's
    DECLARE v_add_files INT DEFAULT IF(p_old_chars IS NULL, 1, 0);
    DECLARE v_add_chars BIGINT DEFAULT p_new_chars - COALESCE(p_old_chars, 0);
    IF p_new_chars > p_max_file_chars AND (p_old_chars IS NULL OR p_new_chars > p_old_chars) THEN
        CALL {P}_fail('cap_exceeded', CONCAT('file text would be ', p_new_chars,
            ' characters, over the cap max_file_chars = ', p_max_file_chars,
            ': keep files small - split it, or merge and delete old content'));
    END IF;
    IF v_add_files > 0 AND p_file_count + v_add_files > p_max_files THEN
        CALL {P}_fail('cap_exceeded', CONCAT('cannot create ', p_path, ': the store already holds ',
            p_file_count, ' files and the cap max_files is ', p_max_files,
            ': merge related files or delete ones you no longer need, then retry'));
    END IF;
    IF p_max_store_chars IS NOT NULL AND v_add_chars > 0
       AND p_total_chars + v_add_chars > p_max_store_chars THEN
        CALL {P}_fail('cap_exceeded', CONCAT('writing ', p_path, ' would bring the store to ',
            p_total_chars + v_add_chars, ' characters, over the cap max_store_chars = ', p_max_store_chars,
            ': condense or delete old files, then retry'));
    END IF;
END""",
    f"""CREATE PROCEDURE {P}_store_row_update(
    IN p_store_id BIGINT, IN p_add_files BIGINT, IN p_add_chars BIGINT, IN p_now DATETIME(6))
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.statements.reads.ADJUST_STORE, under the store lock the writer holds
    UPDATE dbm_stores
       SET file_count = file_count + p_add_files, total_chars = total_chars + p_add_chars,
           updated_at = p_now
     WHERE store_id = p_store_id;
END""",
]

HANDLER = f"""DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        -- undo this call's writes only (the caller's transaction stays usable); after a
        -- deadlock InnoDB has already rolled back the whole transaction
        GET DIAGNOSTICS CONDITION 1 v_errno = MYSQL_ERRNO;
        IF v_errno <> 1213 THEN
            ROLLBACK TO SAVEPOINT {P}write;
        END IF;
        RESIGNAL;
    END;"""


def lock_store(var_key: str, caps: bool) -> str:
    cols = ("store_key, max_file_chars, max_files, max_store_chars, file_count, total_chars"
            if caps else "store_key")
    into = f"{var_key}, v_mfc, v_mf, v_msc, v_nfiles, v_nchars" if caps else var_key
    return f"""-- the writers' lock order (dbmemory.store.locks): the store row first, then file rows;
        -- the counters are exact under this lock
        SELECT {cols} INTO {into} FROM dbm_stores WHERE store_id = p_store_id FOR UPDATE;
        IF {var_key} IS NULL THEN
            CALL {P}_check_identity(p_store_id, NULL);  -- every caller is bound: another user's answer
            CALL {P}_fail('not_found', CONCAT('store ', CAST(p_store_id AS SIGNED), ' does not exist: check the store id'));
        END IF;
        CALL {P}_refuse_reserved(p_store_id, {var_key});  -- before any write
        CALL {P}_check_identity(p_store_id, {var_key});"""


_KEY_PART = "CALL {p}_check_component({v}, '{what}', p_scope);"


