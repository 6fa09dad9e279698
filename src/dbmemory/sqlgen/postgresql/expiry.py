"""PostgreSQL API, the expiry call: ``expire_files`` (mirroring
:func:`dbmemory.store.expiry.expire_files`), for :mod:`dbmemory.sqlgen.postgresql.api`."""

from __future__ import annotations

from dbmemory.sqlgen.api_common import DAYS_RULE, EXPIRY_API_ACTOR
from dbmemory.sqlgen.api_common import MIRRORED as M
from dbmemory.sqlgen.postgresql.rules import S, T

__all__ = [
    "EXPIRE",
]


EXPIRE = f"""CREATE OR REPLACE FUNCTION {S}.expire_files(
    p_days numeric, p_store_id bigint DEFAULT NULL
) RETURNS bigint LANGUAGE plpgsql AS $f$
-- dbmemory.store.expiry.expire_files: the rule of dbmemory.store.statements.bulk.expiry_rule in the caller's
-- transaction, never committed here; returns the number of files deleted
DECLARE
    c_batch_size CONSTANT integer := 1000;  -- dbmemory.store.expiry.expire_files(batch_size=1000)
    -- dbmemory.store.touches.TOUCH_INTERVAL
    c_touch_interval CONSTANT interval := make_interval(secs => {M["TOUCH_INTERVAL_S"]});
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz;
    v_batch bigint;
    v_total bigint := 0;
BEGIN
    -- dbmemory.store.expiry.validate_days (MIN_EXPIRY_DAYS, MAX_EXPIRY_DAYS)
    IF p_days IS NULL OR p_days * 86400 < {M["TOUCH_INTERVAL_S"]} THEN
        PERFORM {S}._fail('invalid_argument', format('{DAYS_RULE}, got %s: pass e.g. days=30',
            coalesce(p_days::text, 'NULL')));
    END IF;
    IF p_days > {M["MAX_EXPIRY_DAYS"]} THEN
        PERFORM {S}._fail('invalid_argument', format(
            'days=%s is too large: pass at most {M["MAX_EXPIRY_DAYS"]} (about 270 years)', p_days));
    END IF;
    IF p_store_id IS NOT NULL THEN
        -- one store: not a reserved one (every store, p_store_id NULL, keeps the rule of
        -- dbmemory.store.expiry, which expires reserved stores' files unless expiry_exempt)
        PERFORM {S}._check_reachable(p_store_id);
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        PERFORM {S}._fail('invalid_argument',
            'expire_files needs a READ COMMITTED transaction: a REPEATABLE READ or SERIALIZABLE snapshot taken before the expiry lock would hide reads recorded meanwhile');
    END IF;
    v_cutoff := v_now - make_interval(secs => p_days * 86400) - c_touch_interval;
    LOOP
        -- reads being recorded hold this row FOR SHARE (dbmemory.store.touches)
        PERFORM 1 FROM {T}.dbm_job_locks WHERE lock_name = 'expiry' FOR UPDATE;
        -- dbmemory.store.expiry._expire_batch: candidates without a lock, then their store rows
        -- FOR UPDATE SKIP LOCKED (the writers' lock order: store row first; a store being
        -- written waits for the next run), the delete with the rule again, the counters of
        -- each held store moved by what is really gone (dbmemory.store.statements.reads.ADJUST_STORE)
        WITH candidates AS (
            SELECT f.file_id, f.store_id FROM {T}.dbm_files f
             WHERE (p_store_id IS NULL OR f.store_id = p_store_id)
               AND f.expiry_exempt = false
               AND f.last_accessed_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM {T}.dbm_file_reads r
                                WHERE r.file_id = f.file_id AND r.read_at >= v_cutoff)
             ORDER BY f.file_id
             LIMIT c_batch_size
        ), held AS (
            SELECT s.store_id, s.store_key FROM {T}.dbm_stores s
             WHERE s.store_id IN (SELECT c.store_id FROM candidates c)
             ORDER BY s.store_id
               FOR UPDATE SKIP LOCKED
        ), gone AS (
            DELETE FROM {T}.dbm_files f USING candidates c, held h
             WHERE f.file_id = c.file_id
               AND h.store_id = c.store_id
               AND f.expiry_exempt = false
               AND f.last_accessed_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM {T}.dbm_file_reads r
                                WHERE r.file_id = f.file_id AND r.read_at >= v_cutoff)
            RETURNING f.file_id, f.store_id, f.file_path, f.char_count
        ), counted AS (
            UPDATE {T}.dbm_stores s
               SET file_count = s.file_count - t.n, total_chars = s.total_chars - t.chars,
                   updated_at = v_now
              FROM (SELECT g.store_id, count(*) AS n, sum(g.char_count) AS chars
                      FROM gone g GROUP BY g.store_id) t
             WHERE s.store_id = t.store_id
        ), forgotten AS (
            DELETE FROM {T}.dbm_file_reads fr USING gone g WHERE fr.file_id = g.file_id
        )
        INSERT INTO {T}.dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        SELECT g.store_id, h.store_key, g.file_path, 'expire', '{EXPIRY_API_ACTOR}',
               g.char_count, NULL, NULL, v_now
          FROM gone g JOIN held h ON h.store_id = g.store_id
         ORDER BY g.file_id;
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        v_total := v_total + v_batch;
        EXIT WHEN v_batch < c_batch_size;
    END LOOP;
    -- recorded reads older than the cutoff of files that are gone
    LOOP
        DELETE FROM {T}.dbm_file_reads WHERE file_id IN (
            SELECT r.file_id FROM {T}.dbm_file_reads r
             WHERE r.read_at < v_cutoff
               AND NOT EXISTS (SELECT 1 FROM {T}.dbm_files f WHERE f.file_id = r.file_id)
             LIMIT c_batch_size FOR UPDATE SKIP LOCKED);
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        EXIT WHEN v_batch < c_batch_size;
    END LOOP;
    RETURN v_total;
END
$f$"""
