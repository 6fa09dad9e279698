"""Oracle API, the expiry call of the package body: ``expire_files`` (mirroring
:func:`dbmemory.store.expiry.expire_files`), for :mod:`dbmemory.sqlgen.oracle.api`."""

from __future__ import annotations

from dbmemory.sqlgen.api_common import DAYS_RULE, EXPIRY_API_ACTOR
from dbmemory.sqlgen.api_common import MIRRORED as M

__all__ = [
    "EXPIRY",
]


EXPIRY = f"""  FUNCTION expire_files_n (p_days IN NUMBER, p_store_id IN NUMBER DEFAULT NULL) RETURN NUMBER IS
    -- dbmemory.store.expiry.expire_files in the caller's transaction (run it at READ COMMITTED),
    -- never committed here; returns the number of files deleted
    c_batch_size     CONSTANT PLS_INTEGER := 1000;
    -- dbmemory.store.touches.TOUCH_INTERVAL
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
    -- dbmemory.store.expiry._expire_batch, the writers' lock order: the store rows first (SKIP
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
    -- dbmemory.store.expiry.validate_days (MIN_EXPIRY_DAYS, MAX_EXPIRY_DAYS)
    IF p_days IS NULL OR p_days * 86400 < {M["TOUCH_INTERVAL_S"]} THEN
      fail('invalid_argument', '{DAYS_RULE}, got ' || NVL(TO_CHAR(p_days), 'NULL') || ': pass e.g. days=30');
    END IF;
    IF p_days > {M["MAX_EXPIRY_DAYS"]} THEN
      fail('invalid_argument', 'days=' || p_days || ' is too large: pass at most {M["MAX_EXPIRY_DAYS"]} (about 270 years)');
    END IF;
    IF p_store_id IS NOT NULL THEN
      -- one store: not a reserved one (every store, p_store_id NULL, keeps the rule of
      -- dbmemory.store.expiry, which expires reserved stores' files unless expiry_exempt)
      check_reachable(p_store_id);
    END IF;
    v_cutoff := v_now - NUMTODSINTERVAL(p_days, 'DAY') - c_touch_interval;
    LOOP
      -- reads being recorded hold the table in ROW SHARE mode (dbmemory.db.dialect.expiry.job_lock)
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
      -- the counters of the stores held move by what is really gone (dbmemory.store.statements.reads.ADJUST_STORE)
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
  END expire_files_n;

"""
"""The package body's expiry function, followed by a blank line (the body drops blank lines)."""
