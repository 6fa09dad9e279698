"""``expiry_job.sql``: the ``dbm_expire_files`` procedure with the same rule as
:mod:`dbmemory.store.expiry` (rendered from its constants), and its daily schedule (see
:mod:`dbmemory.sqlgen`)."""

from __future__ import annotations

from dbmemory.sqlgen._common import (
    DIALECTS,
    EXPIRY_ACTOR,
    EXPIRY_BATCH_SIZE,
    EXPIRY_DEFAULT_DAYS,
    MYSQL_DAYS_FUNC,
    MYSQL_EVENT,
    ORACLE_JOB,
    PG_JOB,
    PROC,
    script_header,
    tidy,
)
from dbmemory.sqlgen.item_jobs import ITEMS_PROC, item_procedure_sql, items_call
from dbmemory.store.expiry import MAX_EXPIRY_DAYS, MIN_EXPIRY_DAYS
from dbmemory.store.touches import TOUCH_INTERVAL

__all__ = ["expiry_procedure_sql", "render_expiry_job"]


# The rule of dbmemory.store.expiry, rendered from the Python constants it mirrors:
# dbmemory.store.touches.TOUCH_INTERVAL (the cutoff is now - days - the interval), MIN_EXPIRY_DAYS and
# MAX_EXPIRY_DAYS (the days check), dbmemory.store.statements.bulk.expiry_rule (the WHERE clause).
_INTERVAL_S = int(TOUCH_INTERVAL.total_seconds())
_DAYS_RULE = (
    f"days must be a number of at least {MIN_EXPIRY_DAYS:.6g} "
    f"({_INTERVAL_S // 3600} hour, the touch interval) and at most {MAX_EXPIRY_DAYS}"
)
_DAYS_BAD = f"p_days IS NULL OR p_days * 86400 < {_INTERVAL_S} OR p_days > {MAX_EXPIRY_DAYS}"


def _rule(alias: str, cutoff: str, false: str) -> str:
    """The expiry rule on ``dbm_files {alias}`` (as :func:`dbmemory.store.statements.bulk.expiry_rule`)."""
    return (
        f"{alias}.expiry_exempt = {false}\n"
        f"       AND {alias}.last_accessed_at < {cutoff}\n"
        f"       AND NOT EXISTS (SELECT 1 FROM dbm_file_reads r\n"
        f"                        WHERE r.file_id = {alias}.file_id AND r.read_at >= {cutoff})"
    )


_RULE_COMMENT = f"""Deletes the files neither written nor read for more than p_days days (24-hour days,
  -- fractions allowed, UTC; cutoff = now - p_days - the touch interval of {_INTERVAL_S} s, since a
  -- read within the interval of a file's last touch is not recorded) that are not
  -- expiry-exempt and have no recorded read since the cutoff, {EXPIRY_BATCH_SIZE} per batch with a
  -- COMMIT after each batch, and writes one 'expire' audit event per file really deleted. Each
  -- batch locks the 'expiry' row of dbm_job_locks, so it waits for reads being recorded, and
  -- deletes with the rule again. Same rule as dbmemory.store.expiry.expire_files."""

_ORACLE_PROC = f"""CREATE OR REPLACE PROCEDURE {PROC} (
  p_days    IN  NUMBER,
  p_expired OUT NUMBER
) AS
  -- {_RULE_COMMENT}
  c_batch_size     CONSTANT PLS_INTEGER := {EXPIRY_BATCH_SIZE};
  -- dbmemory.store.touches.TOUCH_INTERVAL
  c_touch_interval CONSTANT INTERVAL DAY TO SECOND := NUMTODSINTERVAL({_INTERVAL_S}, 'SECOND');
  TYPE t_numbers IS TABLE OF NUMBER;
  TYPE t_paths IS TABLE OF dbm_files.file_path%TYPE;
  v_now       TIMESTAMP := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  v_cutoff    TIMESTAMP;
  v_ids       t_numbers;
  v_file_ids  t_numbers;
  v_store_ids t_numbers;
  v_sizes     t_numbers;
  v_paths     t_paths;
  v_batch     PLS_INTEGER;
  v_items_expired NUMBER;
  v_items_purged  NUMBER;
  -- writers' lock order: store rows first (SKIP LOCKED: a store being written waits for the
  -- next run), then the expired files of the stores held
  CURSOR c_stores (p_cutoff TIMESTAMP) IS
    SELECT s.store_id
      FROM dbm_stores s
     WHERE EXISTS (SELECT 1 FROM dbm_files f
                    WHERE f.store_id = s.store_id
                      AND {_rule("f", "p_cutoff", "0")})
       FOR UPDATE SKIP LOCKED;
BEGIN
  IF {_DAYS_BAD} THEN
    RAISE_APPLICATION_ERROR(-20001,
      '{PROC}: {_DAYS_RULE}, got ' || NVL(TO_CHAR(p_days), 'NULL'));
  END IF;
  v_cutoff := v_now - NUMTODSINTERVAL(p_days, 'DAY') - c_touch_interval;
  p_expired := 0;
  LOOP
    -- a table lock: reads being recorded hold it in ROW SHARE mode (dbmemory.db.dialect.expiry.job_lock)
    LOCK TABLE dbm_job_locks IN EXCLUSIVE MODE;
    OPEN c_stores(v_cutoff);
    FETCH c_stores BULK COLLECT INTO v_ids LIMIT c_batch_size;
    CLOSE c_stores;
    EXIT WHEN v_ids.COUNT = 0;
    FORALL i IN 1 .. v_ids.COUNT
      DELETE FROM dbm_files f
       WHERE f.store_id = v_ids(i)
         AND {_rule("f", "v_cutoff", "0")}
      RETURNING f.file_id, f.store_id, f.file_path, f.char_count
        BULK COLLECT INTO v_file_ids, v_store_ids, v_paths, v_sizes;
    -- the counters of the stores held, recounted under their locks
    FORALL i IN 1 .. v_ids.COUNT
      UPDATE dbm_stores s
         SET s.file_count = (SELECT COUNT(*) FROM dbm_files f WHERE f.store_id = s.store_id),
             s.total_chars = (SELECT NVL(SUM(f.char_count), 0) FROM dbm_files f
                               WHERE f.store_id = s.store_id),
             s.updated_at = v_now
       WHERE s.store_id = v_ids(i);
    FORALL i IN 1 .. v_file_ids.COUNT
      INSERT INTO dbm_audit_events
        (store_id, store_key, file_path, action_name, actor_name,
         chars_before, chars_after, created_at)
      VALUES
        (v_store_ids(i),
         (SELECT s.store_key FROM dbm_stores s WHERE s.store_id = v_store_ids(i)),
         v_paths(i), 'expire', '{EXPIRY_ACTOR}', v_sizes(i), NULL, v_now);
    FORALL i IN 1 .. v_file_ids.COUNT
      DELETE FROM dbm_file_reads WHERE file_id = v_file_ids(i);
    COMMIT;
    p_expired := p_expired + v_file_ids.COUNT;
    EXIT WHEN v_ids.COUNT < c_batch_size;
  END LOOP;
  COMMIT;
  -- recorded reads older than the cutoff of files that are gone
  LOOP
    DELETE FROM dbm_file_reads r
     WHERE r.read_at < v_cutoff
       AND NOT EXISTS (SELECT 1 FROM dbm_files f WHERE f.file_id = r.file_id)
       AND ROWNUM <= c_batch_size;
    v_batch := SQL%ROWCOUNT;
    COMMIT;
    EXIT WHEN v_batch < c_batch_size;
  END LOOP;
  -- memory items: expiry by class, then the grace-period purge (dbmemory.items.retention)
{items_call("oracle")}
END {PROC};"""

_PG_PROC = f"""CREATE OR REPLACE PROCEDURE {PROC}(
    p_days numeric,
    INOUT p_expired bigint DEFAULT NULL
)
LANGUAGE plpgsql
AS $proc$
-- {_RULE_COMMENT.replace(chr(10) + "  --", chr(10) + "--")}
-- CALL it outside an explicit transaction, at READ COMMITTED.
DECLARE
    c_batch_size CONSTANT integer := {EXPIRY_BATCH_SIZE};
    -- dbmemory.store.touches.TOUCH_INTERVAL
    c_touch_interval CONSTANT interval := make_interval(secs => {_INTERVAL_S});
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz;
    v_batch bigint;
    v_items_expired bigint;
    v_items_purged bigint;
BEGIN
    IF {_DAYS_BAD} THEN
        RAISE EXCEPTION '{PROC}: {_DAYS_RULE}, got %',
            coalesce(p_days::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION '{PROC}: run it at READ COMMITTED (a snapshot taken before the expiry lock would hide reads recorded meanwhile), not %',
            current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    v_cutoff := v_now - make_interval(secs => p_days * 86400) - c_touch_interval;
    p_expired := 0;
    LOOP
        -- reads being recorded hold this row FOR SHARE (dbmemory.store.touches)
        PERFORM 1 FROM dbm_job_locks WHERE lock_name = 'expiry' FOR UPDATE;
        -- writers' lock order: store rows first (SKIP LOCKED: a store being written waits for
        -- the next run), then the file rows; the store counters move by what is really gone
        WITH candidates AS (
            SELECT f.file_id, f.store_id
              FROM dbm_files f
             WHERE {_rule("f", "v_cutoff", "false")}
             ORDER BY f.file_id
             LIMIT c_batch_size
        ), held AS (
            SELECT s.store_id, s.store_key
              FROM dbm_stores s
             WHERE s.store_id IN (SELECT c.store_id FROM candidates c)
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM dbm_files f
             USING candidates c, held h
             WHERE f.file_id = c.file_id
               AND h.store_id = c.store_id
               AND {_rule("f", "v_cutoff", "false")}
            RETURNING f.file_id, f.store_id, f.file_path, f.char_count
        ), counted AS (
            UPDATE dbm_stores s
               SET file_count = s.file_count - t.n,
                   total_chars = s.total_chars - t.chars,
                   updated_at = v_now
              FROM (SELECT g.store_id, count(*) AS n, sum(g.char_count) AS chars
                      FROM gone g GROUP BY g.store_id) t
             WHERE s.store_id = t.store_id
        ), forgotten AS (
            DELETE FROM dbm_file_reads fr USING gone g WHERE fr.file_id = g.file_id
        )
        INSERT INTO dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, created_at)
        SELECT g.store_id, h.store_key, g.file_path, 'expire', '{EXPIRY_ACTOR}',
               g.char_count, NULL, v_now
          FROM gone g
          JOIN held h ON h.store_id = g.store_id
         ORDER BY g.file_id;
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        COMMIT;
        EXIT WHEN v_batch = 0;
        p_expired := p_expired + v_batch;
    END LOOP;
    -- recorded reads older than the cutoff of files that are gone
    LOOP
        DELETE FROM dbm_file_reads
         WHERE file_id IN (
            SELECT r.file_id
              FROM dbm_file_reads r
             WHERE r.read_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM dbm_files f WHERE f.file_id = r.file_id)
             LIMIT c_batch_size
               FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        COMMIT;
        EXIT WHEN v_batch < c_batch_size;
    END LOOP;
    -- memory items: expiry by class, then the grace-period purge (dbmemory.items.retention)
{items_call("postgresql")}
END
$proc$"""

_MYSQL_PROC = f"""CREATE PROCEDURE {PROC}(IN p_days DECIMAL(12, 6), OUT p_expired BIGINT)
    MODIFIES SQL DATA
    COMMENT 'dbmemory: delete files untouched for more than p_days days'
BEGIN
    -- {_RULE_COMMENT.replace(chr(10) + "  --", chr(10) + "    --")}
    DECLARE c_batch_size INT DEFAULT {EXPIRY_BATCH_SIZE};
    DECLARE c_touch_interval_s INT DEFAULT {_INTERVAL_S}; -- dbmemory.store.touches.TOUCH_INTERVAL
    DECLARE v_now DATETIME(6);
    DECLARE v_cutoff DATETIME(6);
    DECLARE v_batch BIGINT DEFAULT 0;
    DECLARE v_lock VARCHAR(30);
    DECLARE v_message VARCHAR(300);
    DECLARE v_items_expired BIGINT;
    DECLARE v_items_purged BIGINT;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        DROP TEMPORARY TABLE IF EXISTS dbm_expire_batch;
        DROP TEMPORARY TABLE IF EXISTS dbm_expire_stores;
        RESIGNAL;
    END;
    IF {_DAYS_BAD} THEN
        SET v_message = CONCAT('{PROC}: {_DAYS_RULE}, got ',
                               COALESCE(CAST(p_days AS CHAR), 'NULL'));
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = v_message;
    END IF;
    SET v_now = UTC_TIMESTAMP(6);
    SET v_cutoff = v_now - INTERVAL CAST(ROUND(p_days * 86400000000) AS SIGNED) MICROSECOND
                         - INTERVAL c_touch_interval_s SECOND;
    SET p_expired = 0;
    DROP TEMPORARY TABLE IF EXISTS dbm_expire_batch;
    CREATE TEMPORARY TABLE dbm_expire_batch (
        file_id BIGINT NOT NULL PRIMARY KEY,
        store_id BIGINT NULL,
        file_path VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        char_count INT NULL
    );
    DROP TEMPORARY TABLE IF EXISTS dbm_expire_stores;
    CREATE TEMPORARY TABLE dbm_expire_stores (store_id BIGINT NOT NULL PRIMARY KEY);
    batch_loop: LOOP
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        -- reads being recorded hold this row LOCK IN SHARE MODE (dbmemory.store.touches)
        SELECT lock_name INTO v_lock FROM dbm_job_locks WHERE lock_name = 'expiry' FOR UPDATE;
        DELETE FROM dbm_expire_batch;
        DELETE FROM dbm_expire_stores;
        INSERT INTO dbm_expire_batch (file_id, store_id, file_path, char_count)
            SELECT f.file_id, f.store_id, f.file_path, f.char_count
              FROM dbm_files f
             WHERE {_rule("f", "v_cutoff", "0")}
             ORDER BY f.file_id
             LIMIT c_batch_size;
        -- writers' lock order: store rows first (SKIP LOCKED: a store being written waits for
        -- the next run), then the file rows of the stores held
        INSERT INTO dbm_expire_stores (store_id)
            SELECT s.store_id
              FROM dbm_stores s
             WHERE s.store_id IN (SELECT b.store_id FROM dbm_expire_batch b)
               FOR UPDATE SKIP LOCKED;
        DELETE b FROM dbm_expire_batch b
          LEFT JOIN dbm_expire_stores h ON h.store_id = b.store_id
         WHERE h.store_id IS NULL;
        -- delete with the rule again, one file by primary key at a time, and keep in the
        -- batch only what THIS delete removed (ROW_COUNT): at READ COMMITTED a candidate may
        -- already be gone (deleted by a writer before the store lock was granted) and must
        -- not move the counters or be audited
        BEGIN
            DECLARE v_last BIGINT DEFAULT 0;
            DECLARE v_next BIGINT;
            delete_loop: LOOP
                SET v_next = NULL;
                SELECT MIN(b.file_id) INTO v_next FROM dbm_expire_batch b WHERE b.file_id > v_last;
                IF v_next IS NULL THEN
                    LEAVE delete_loop;
                END IF;
                SET v_last = v_next;
                DELETE f FROM dbm_files f WHERE f.file_id = v_next AND {_rule("f", "v_cutoff", "0")};
                IF ROW_COUNT() = 0 THEN
                    DELETE FROM dbm_expire_batch WHERE file_id = v_next;
                END IF;
            END LOOP delete_loop;
        END;
        -- the store counters move by what is gone
        UPDATE dbm_stores s
          JOIN (SELECT b.store_id, COUNT(*) AS n, SUM(b.char_count) AS chars
                  FROM dbm_expire_batch b GROUP BY b.store_id) t ON t.store_id = s.store_id
           SET s.file_count = s.file_count - t.n,
               s.total_chars = s.total_chars - t.chars,
               s.updated_at = v_now;
        INSERT INTO dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, created_at)
        SELECT b.store_id, s.store_key, b.file_path, 'expire', '{EXPIRY_ACTOR}',
               b.char_count, NULL, v_now
          FROM dbm_expire_batch b
          LEFT JOIN dbm_stores s ON s.store_id = b.store_id
         ORDER BY b.file_id;
        SET v_batch = ROW_COUNT();
        DELETE fr FROM dbm_file_reads fr JOIN dbm_expire_batch b ON b.file_id = fr.file_id;
        COMMIT;
        IF v_batch = 0 THEN
            LEAVE batch_loop;
        END IF;
        SET p_expired = p_expired + v_batch;
    END LOOP batch_loop;
    -- recorded reads older than the cutoff of files that are gone
    purge_loop: LOOP
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        DELETE FROM dbm_expire_batch;
        INSERT INTO dbm_expire_batch (file_id)
            SELECT r.file_id
              FROM dbm_file_reads r
             WHERE r.read_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM dbm_files f WHERE f.file_id = r.file_id)
             LIMIT c_batch_size
               FOR UPDATE SKIP LOCKED;
        SET v_batch = ROW_COUNT();
        DELETE fr FROM dbm_file_reads fr JOIN dbm_expire_batch b ON b.file_id = fr.file_id;
        COMMIT;
        IF v_batch < c_batch_size THEN
            LEAVE purge_loop;
        END IF;
    END LOOP purge_loop;
    DROP TEMPORARY TABLE IF EXISTS dbm_expire_batch;
    DROP TEMPORARY TABLE IF EXISTS dbm_expire_stores;
    -- memory items: expiry by class, then the grace-period purge (dbmemory.items.retention)
{items_call("mysql")}
END"""

_MYSQL_DAYS = f"""CREATE FUNCTION {MYSQL_DAYS_FUNC}() RETURNS INT
    DETERMINISTIC NO SQL
    COMMENT 'dbmemory: retention in days used by the daily expiry event'
    RETURN {EXPIRY_DEFAULT_DAYS}"""


def expiry_procedure_sql(dialect: str) -> list[str]:
    """The statements that (re)create ``dbm_expire_files`` on ``dialect``, without any client
    delimiters: what a driver can execute one by one (the tests do).

    Args:
        dialect: ``"oracle"``, ``"postgresql"`` or ``"mysql"``.

    Returns:
        List of SQL statements (no trailing ``;`` or ``/``): ``dbm_expire_items`` (memory
        items, :mod:`dbmemory.sqlgen.item_jobs`), which ``dbm_expire_files`` calls at its end,
        then ``dbm_expire_files``. Signatures:
        Oracle ``dbm_expire_files(p_days IN NUMBER, p_expired OUT NUMBER)``;
        PostgreSQL ``CALL dbm_expire_files(p_days numeric, INOUT p_expired bigint)``;
        MySQL/MariaDB ``CALL dbm_expire_files(IN p_days DECIMAL(12,6), OUT p_expired BIGINT)``.
        ``p_days`` may have a fraction, as in the Python API.

    Raises:
        ValueError: unknown dialect.
    """
    if dialect == "oracle":
        return [item_procedure_sql("oracle"), _ORACLE_PROC]
    if dialect == "postgresql":
        return [item_procedure_sql("postgresql"), _PG_PROC]
    if dialect == "mysql":
        return [
            f"DROP PROCEDURE IF EXISTS {ITEMS_PROC}",
            item_procedure_sql("mysql"),
            f"DROP PROCEDURE IF EXISTS {PROC}",
            _MYSQL_PROC,
        ]
    raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")


def _expiry_oracle() -> str:
    header = script_header(
        "oracle",
        "expiry job",
        [
            "-- Creates the procedure dbm_expire_files and a daily DBMS_SCHEDULER job calling it.",
            "-- Needs CREATE PROCEDURE and CREATE JOB; run after install.sql as the schema owner.",
            "-- Run by hand: DECLARE n NUMBER; BEGIN dbm_expire_files(30, n); END;",
            "-- Remove: uninstall.sql drops both (or DBMS_SCHEDULER.DROP_JOB + DROP PROCEDURE).",
        ],
    )
    settings = f"""-- Setting: files not read or written for more than expiry_days days are deleted.
DEFINE expiry_days = {EXPIRY_DEFAULT_DAYS}
"""
    return f"""{header}
{settings}
WHENEVER SQLERROR EXIT SQL.SQLCODE
SET VERIFY OFF

-- Memory items: expiry by class and the grace-period purge; dbm_expire_files calls it.
{item_procedure_sql("oracle")}
/

{_ORACLE_PROC}
/

-- Stop here if the procedure did not compile (SQL*Plus only warns).
DECLARE
  v_status user_objects.status%TYPE;
BEGIN
  FOR p IN (SELECT object_name, status FROM user_objects
             WHERE object_name IN ('{ITEMS_PROC.upper()}', '{PROC.upper()}')
               AND object_type = 'PROCEDURE') LOOP
    IF p.status <> 'VALID' THEN
      RAISE_APPLICATION_ERROR(-20002,
        p.object_name || ' is invalid: run SHOW ERRORS PROCEDURE ' || p.object_name);
    END IF;
  END LOOP;
END;
/

-- (Re)create the daily job at 03:15 UTC: the start date is in the named region 'UTC' (not an
-- offset), so the schedule never shifts with daylight saving time.
DECLARE
  v_count PLS_INTEGER;
BEGIN
  SELECT COUNT(*) INTO v_count FROM user_scheduler_jobs WHERE job_name = '{ORACLE_JOB}';
  IF v_count > 0 THEN
    DBMS_SCHEDULER.DROP_JOB(job_name => '{ORACLE_JOB}', force => TRUE);
  END IF;
  DBMS_SCHEDULER.CREATE_JOB(
    job_name        => '{ORACLE_JOB}',
    job_type        => 'PLSQL_BLOCK',
    job_action      => 'DECLARE n NUMBER; BEGIN {PROC}(&expiry_days, n); END;',
    start_date      => SYSTIMESTAMP AT TIME ZONE 'UTC',
    repeat_interval => 'FREQ=DAILY; BYHOUR=3; BYMINUTE=15; BYSECOND=0',
    enabled         => TRUE,
    comments        => 'dbmemory: delete memory files untouched for &expiry_days days');
END;
/
"""


def _expiry_postgresql() -> str:
    header = script_header(
        "postgresql",
        "expiry job",
        [
            "-- Creates the procedure dbm_expire_files and a daily pg_cron job calling it.",
            "-- pg_cron must be installed first (shared_preload_libraries = 'pg_cron', then",
            "-- CREATE EXTENSION pg_cron; in the database named by cron.database_name). When",
            "-- dbmemory lives in another database, replace cron.schedule(...) below with",
            "-- cron.schedule_in_database(<same three arguments>, current_database()).",
            "-- Run: psql -v ON_ERROR_STOP=1 -d <database> -f expiry_job.sql",
            "-- Run by hand (autocommit, not inside BEGIN): CALL dbm_expire_files(30);",
            "-- Remove: uninstall.sql drops both (or cron.unschedule + DROP PROCEDURE).",
        ],
    )
    settings = f"""-- Setting: files not read or written for more than expiry_days days are deleted.
\\set expiry_days {EXPIRY_DEFAULT_DAYS}
"""
    return f"""{header}
{settings}
-- Memory items: expiry by class and the grace-period purge; dbm_expire_files calls it.
{item_procedure_sql("postgresql")};

{_PG_PROC};

-- (Re)schedule the daily job at 03:15 UTC; a job of the same name is replaced.
SELECT cron.schedule(
    '{PG_JOB}',
    '15 3 * * *',
    format('CALL {PROC}(%s)', (:'expiry_days')::numeric)
);
"""


def _expiry_mysql() -> str:
    header = script_header(
        "mysql",
        "expiry job",
        [
            "-- Creates the procedure dbm_expire_files and a daily EVENT calling it.",
            "-- Needs CREATE ROUTINE and EVENT privileges; events run only while the event",
            "-- scheduler is on (SET GLOBAL event_scheduler = ON, or event_scheduler=ON in",
            "-- my.cnf).",
            "-- Run: mysql <database> < expiry_job.sql",
            "-- Run by hand: CALL dbm_expire_files(30, @n); SELECT @n;",
            "-- Remove: uninstall.sql drops all three (DROP EVENT/PROCEDURE/FUNCTION).",
        ],
    )
    settings = f"""-- Setting: files not read or written for more than expiry_days days are deleted.
-- An EVENT body cannot see client variables, so the setting is a one-line function: edit
-- the RETURN value (default {EXPIRY_DEFAULT_DAYS}) or re-create the function later to change it.
DROP FUNCTION IF EXISTS {MYSQL_DAYS_FUNC};
{_MYSQL_DAYS};
"""
    return f"""{header}
{settings}
DROP PROCEDURE IF EXISTS {ITEMS_PROC};
DROP PROCEDURE IF EXISTS {PROC};

DELIMITER //
-- Memory items: expiry by class and the grace-period purge; dbm_expire_files calls it.
{item_procedure_sql("mysql")}//

{_MYSQL_PROC}//
DELIMITER ;

-- (Re)create the daily event, first run tomorrow at 03:15 (server time zone).
DROP EVENT IF EXISTS {MYSQL_EVENT};
CREATE EVENT {MYSQL_EVENT}
    ON SCHEDULE EVERY 1 DAY
    STARTS CURRENT_DATE + INTERVAL 1 DAY + INTERVAL 195 MINUTE
    ON COMPLETION PRESERVE
    ENABLE
    COMMENT 'dbmemory: delete memory files untouched for dbm_expiry_days() days'
    DO CALL {PROC}({MYSQL_DAYS_FUNC}(), @dbm_expired);
"""


def render_expiry_job(dialect: str) -> str:
    """The expiry job script for ``dialect``: the procedure and its daily schedule.

    Raises:
        ValueError: unknown dialect.
    """
    renderers = {
        "oracle": _expiry_oracle,
        "postgresql": _expiry_postgresql,
        "mysql": _expiry_mysql,
    }
    if dialect not in renderers:
        raise ValueError(f"dialect {dialect!r} must be one of {', '.join(DIALECTS)}")
    return tidy(renderers[dialect]())

