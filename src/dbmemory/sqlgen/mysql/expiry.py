"""MySQL/MariaDB API, the expiry call: ``expire_files`` (mirroring
:func:`dbmemory.store.expiry.expire_files`), for :mod:`dbmemory.sqlgen.mysql.api`."""

from __future__ import annotations

from dbmemory.sqlgen.api_common import DAYS_RULE, EXPIRY_API_ACTOR
from dbmemory.sqlgen.api_common import MIRRORED as M
from dbmemory.sqlgen.mysql.rules import BIN, HANDLER, NUMBER, P, U

__all__ = [
    "EXPIRE",
]


def _expiry_rule(alias: str) -> str:
    """dbmemory.store.statements.bulk.expiry_rule on dbm_files ``alias`` at ``v_cutoff``."""
    return (
        f"{alias}.expiry_exempt = 0 AND {alias}.last_accessed_at < v_cutoff\n"
        f"               AND NOT EXISTS (SELECT 1 FROM dbm_file_reads r\n"
        f"                                WHERE r.file_id = {alias}.file_id AND r.read_at >= v_cutoff)"
    )


EXPIRE = f"""CREATE PROCEDURE {P}expire_files(
    IN p_days DECIMAL(12, 6), IN p_store_id {NUMBER}, OUT p_expired BIGINT)
    MODIFIES SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.store.expiry.expire_files in the caller's transaction, never committed here
    DECLARE c_batch_size INT DEFAULT 1000;  -- dbmemory.store.expiry.expire_files(batch_size=1000)
    DECLARE v_now DATETIME(6) DEFAULT UTC_TIMESTAMP(6);
    DECLARE v_cutoff DATETIME(6);
    DECLARE v_batch BIGINT;
    DECLARE v_gone BIGINT;
    DECLARE v_lock VARCHAR(30);
    DECLARE v_errno INT;
    -- dbmemory.store.expiry.validate_days (MIN_EXPIRY_DAYS, MAX_EXPIRY_DAYS)
    IF p_days IS NULL OR p_days * 86400 < {M["TOUCH_INTERVAL_S"]} THEN
        CALL {P}_fail('invalid_argument', CONCAT('{DAYS_RULE}, got ', COALESCE(p_days, 'NULL'), ': pass e.g. days=30'));
    END IF;
    IF p_days > {M["MAX_EXPIRY_DAYS"]} THEN
        CALL {P}_fail('invalid_argument', CONCAT('days=', p_days, ' is too large: pass at most {M["MAX_EXPIRY_DAYS"]} (about 270 years)'));
    END IF;
    IF p_store_id IS NOT NULL THEN
        -- one store: not a reserved one (every store, p_store_id NULL, keeps the rule of
        -- dbmemory.store.expiry, which expires reserved stores' files unless expiry_exempt)
        CALL {P}_check_reachable(p_store_id);
    END IF;
    CALL {P}_need_transaction();
    -- dbmemory.store.touches.TOUCH_INTERVAL
    SET v_cutoff = v_now - INTERVAL CAST(ROUND(p_days * 86400000000) AS SIGNED) MICROSECOND
                         - INTERVAL {M["TOUCH_INTERVAL_S"]} SECOND;
    SET p_expired = 0;
    SAVEPOINT {P}write;
    BEGIN
        {HANDLER}
        CREATE TEMPORARY TABLE IF NOT EXISTS {P}expire_batch (
            file_id BIGINT NOT NULL PRIMARY KEY,
            store_id BIGINT NULL,
            file_path VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
            char_count INT NULL
        );
        CREATE TEMPORARY TABLE IF NOT EXISTS {P}expire_stores (
            store_id BIGINT NOT NULL PRIMARY KEY,
            store_key VARCHAR(700) {U} {BIN} NULL
        );
        batch_loop: LOOP
            -- reads being recorded hold this row LOCK IN SHARE MODE (dbmemory.store.touches)
            SELECT lock_name INTO v_lock FROM dbm_job_locks WHERE lock_name = 'expiry' FOR UPDATE;
            DELETE FROM {P}expire_batch;
            DELETE FROM {P}expire_stores;
            -- dbmemory.store.expiry._expire_batch: candidates without a lock, then their store rows
            -- FOR UPDATE SKIP LOCKED (the writers' lock order: store row first; a store being
            -- written waits for the next run), the delete with the rule again, the counters
            -- of each held store moved by what is really gone (dbmemory.store.statements.reads.ADJUST_STORE)
            -- (a cursor: a non-locking read; INSERT ... SELECT would share-lock the rows it
            -- reads at REPEATABLE READ and wait for a writer's file rows)
            BEGIN
                DECLARE v_done BOOLEAN DEFAULT FALSE;
                DECLARE v_fid BIGINT;
                DECLARE v_sid BIGINT;
                DECLARE v_fpath VARCHAR(1000) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
                DECLARE v_fchars INT;
                DECLARE c_candidates CURSOR FOR
                    SELECT f.file_id, f.store_id, f.file_path, f.char_count
                      FROM dbm_files f
                     WHERE (p_store_id IS NULL OR f.store_id = p_store_id)
                       AND {_expiry_rule("f")}
                     ORDER BY f.file_id
                     LIMIT c_batch_size;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
                SET v_batch = 0;
                OPEN c_candidates;
                candidate_loop: LOOP
                    FETCH c_candidates INTO v_fid, v_sid, v_fpath, v_fchars;
                    IF v_done THEN
                        LEAVE candidate_loop;
                    END IF;
                    INSERT INTO {P}expire_batch (file_id, store_id, file_path, char_count)
                    VALUES (v_fid, v_sid, v_fpath, v_fchars);
                    SET v_batch = v_batch + 1;
                END LOOP candidate_loop;
                CLOSE c_candidates;
            END;
            INSERT INTO {P}expire_stores (store_id, store_key)
                SELECT s.store_id, s.store_key FROM dbm_stores s
                 WHERE s.store_id IN (SELECT b.store_id FROM {P}expire_batch b)
                 ORDER BY s.store_id
                   FOR UPDATE SKIP LOCKED;
            DELETE b FROM {P}expire_batch b
              LEFT JOIN {P}expire_stores h ON h.store_id = b.store_id
             WHERE h.store_id IS NULL;
            -- STRAIGHT_JOIN: the batch drives, so only its rows are read (and locked) by
            -- primary key; a scan of dbm_files or dbm_stores would wait for rows writers hold
            -- one DELETE by primary key per candidate, its ROW_COUNT() saying whether THIS
            -- delete removed the file: a candidate read from the snapshot may already be gone
            -- (another writer deleted it and committed before the store lock was granted), and
            -- must not move the counters or be audited twice
            BEGIN
                DECLARE v_last BIGINT DEFAULT 0;
                DECLARE v_next BIGINT;
                delete_loop: LOOP
                    SET v_next = NULL;
                    SELECT MIN(b.file_id) INTO v_next FROM {P}expire_batch b WHERE b.file_id > v_last;
                    IF v_next IS NULL THEN
                        LEAVE delete_loop;
                    END IF;
                    SET v_last = v_next;
                    DELETE f FROM dbm_files f WHERE f.file_id = v_next AND {_expiry_rule("f")};
                    IF ROW_COUNT() = 0 THEN
                        DELETE FROM {P}expire_batch WHERE file_id = v_next;
                    END IF;
                END LOOP delete_loop;
            END;
            -- one UPDATE by primary key per store held (a join may scan dbm_stores and wait
            -- for a store row a writer holds, measured on MariaDB 10.11)
            BEGIN
                DECLARE v_done BOOLEAN DEFAULT FALSE;
                DECLARE v_sid BIGINT;
                DECLARE v_n BIGINT;
                DECLARE v_sum BIGINT;
                DECLARE c_gone CURSOR FOR
                    SELECT b.store_id, COUNT(*), SUM(b.char_count)
                      FROM {P}expire_batch b GROUP BY b.store_id ORDER BY b.store_id;
                DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
                OPEN c_gone;
                gone_loop: LOOP
                    FETCH c_gone INTO v_sid, v_n, v_sum;
                    IF v_done THEN
                        LEAVE gone_loop;
                    END IF;
                    UPDATE dbm_stores
                       SET file_count = file_count - v_n, total_chars = total_chars - v_sum,
                           updated_at = v_now
                     WHERE store_id = v_sid;
                END LOOP gone_loop;
                CLOSE c_gone;
            END;
            INSERT INTO dbm_audit_events
                (store_id, store_key, file_path, action_name, actor_name,
                 chars_before, chars_after, detail_text, created_at)
            SELECT b.store_id, h.store_key, b.file_path, 'expire', '{EXPIRY_API_ACTOR}',
                   b.char_count, NULL, NULL, v_now
              FROM {P}expire_batch b JOIN {P}expire_stores h ON h.store_id = b.store_id
             ORDER BY b.file_id;
            SET v_gone = ROW_COUNT();
            SET p_expired = p_expired + v_gone;
            DELETE fr FROM {P}expire_batch b STRAIGHT_JOIN dbm_file_reads fr ON fr.file_id = b.file_id;
            -- a batch that deleted nothing would choose the same candidates again
            IF v_batch < c_batch_size OR v_gone = 0 THEN
                LEAVE batch_loop;
            END IF;
        END LOOP batch_loop;
        purge_loop: LOOP
            DELETE FROM {P}expire_batch;
            INSERT INTO {P}expire_batch (file_id)
                SELECT r.file_id FROM dbm_file_reads r
                 WHERE r.read_at < v_cutoff
                   AND NOT EXISTS (SELECT 1 FROM dbm_files f WHERE f.file_id = r.file_id)
                 LIMIT c_batch_size FOR UPDATE SKIP LOCKED;
            SET v_batch = ROW_COUNT();
            DELETE fr FROM dbm_file_reads fr JOIN {P}expire_batch b ON b.file_id = fr.file_id;
            IF v_batch < c_batch_size THEN
                LEAVE purge_loop;
            END IF;
        END LOOP purge_loop;
        DROP TEMPORARY TABLE IF EXISTS {P}expire_batch;
        DROP TEMPORARY TABLE IF EXISTS {P}expire_stores;
    END;
END"""
