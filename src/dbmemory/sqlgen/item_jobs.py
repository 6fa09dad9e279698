"""The ``dbm_expire_items`` procedures: memory items' expiry by class and the grace-period purge,
with the rules of :mod:`dbmemory.items.retention` (rendered from its constants). The files'
procedure ``dbm_expire_files`` calls it at its end, so the daily job of ``expiry_job.sql`` runs
both, as ``dbmemory expire`` does.

Rules (mirrored from :func:`dbmemory.items.retention.expire_rule` and
:func:`~dbmemory.items.retention.purge_rule`):

1. a live item (``deleted_at IS NULL``) whose ``expires_at`` is at or before now is
   soft-deleted (``deleted_at = now``, ``version_no + 1``) with an ``item_expire`` audit event,
   unless it is an auto item not folded into the profile yet (``updated_at`` after its user's
   ``summary`` mark in ``dbm_item_marks``, or none) whose ``expires_at`` is less than its
   organisation's ``grace_days`` ago: it waits for the fold;
2. a soft-deleted item whose ``deleted_at`` is at or before now minus its organisation's
   ``grace_days`` (``dbm_org_settings``, default
   :data:`dbmemory.items.settings.DEFAULTS` ``['grace_days']``) is deleted with an
   ``item_purge`` audit event.

Batches of :data:`dbmemory.items.retention.BATCH` items, ``FOR UPDATE SKIP LOCKED``, the rule
again in the change, a ``COMMIT`` after each batch.
"""

from __future__ import annotations

from dbmemory.items.retention import BATCH, SUMMARY_MARK
from dbmemory.items.settings import DEFAULTS
from dbmemory.sqlgen._common import EXPIRY_ACTOR

__all__ = ["ITEMS_PROC", "item_procedure_sql", "items_call"]

ITEMS_PROC = "dbm_expire_items"
_GRACE = int(DEFAULTS["grace_days"])

_COMMENT = (
    "Soft-deletes memory items whose expires_at has come (item_expire audit events) and\n"
    "  -- deletes soft-deleted items past their organisation's grace_days (default "
    f"{_GRACE}; item_purge\n"
    f"  -- audit events), {BATCH} per batch with a COMMIT after each. Same rules as\n"
    "  -- dbmemory.items.retention.run_item_retention."
)


def _expire(alias: str, now: str, dialect: str) -> str:
    """Rule 1 with its wait for the fold (:func:`dbmemory.items.retention.held_rule`)."""
    return (
        f"{alias}.deleted_at IS NULL AND {alias}.expires_at IS NOT NULL "
        f"AND {alias}.expires_at <= {now}\n"
        f"               AND NOT ({alias}.item_kind = 'auto' AND NOT EXISTS (SELECT 1 FROM dbm_item_marks m\n"
        f"                  WHERE m.org_id = {alias}.org_id AND m.user_key = {alias}.user_key\n"
        f"                    AND m.mark_key = '{SUMMARY_MARK}' AND m.marked_at >= {alias}.updated_at)\n"
        f"               AND {alias}.expires_at > {now} - {_GRACE_INTERVAL[dialect](alias)})"
    )


def _grace(alias: str, cast: str) -> str:
    return (
        f"COALESCE((SELECT {cast} FROM dbm_org_settings s\n"
        f"                  WHERE s.org_id = {alias}.org_id AND s.setting_name = 'grace_days'), c_grace_days)"
    )


_GRACE_INTERVAL = {
    "oracle": lambda a: f"NUMTODSINTERVAL({_grace(a, 'MAX(TO_NUMBER(s.setting_value))')}, 'DAY')",
    "postgresql": lambda a: f"make_interval(days => {_grace(a, 's.setting_value::integer')})",
    "mysql": lambda a: f"INTERVAL {_grace(a, 'CAST(s.setting_value AS SIGNED)')} DAY",
}
"""The organisation's ``grace_days`` as an interval, per dialect (as the purges write it)."""

_AUDIT_COLUMNS = "(org_id, user_key, item_id, action_name, actor_name, chars_before, chars_after, created_at)"


def _oracle_purge(alias: str) -> str:
    grace = _grace(alias, "MAX(TO_NUMBER(s.setting_value))")
    return f"{alias}.deleted_at IS NOT NULL\n       AND {alias}.deleted_at <= v_now - NUMTODSINTERVAL({grace}, 'DAY')"


_ORACLE = f"""CREATE OR REPLACE PROCEDURE {ITEMS_PROC} (
  p_expired OUT NUMBER,
  p_purged  OUT NUMBER
) AS
  -- {_COMMENT}
  c_batch_size CONSTANT PLS_INTEGER := {BATCH};
  c_grace_days CONSTANT NUMBER := {_GRACE}; -- dbmemory.items.settings.DEFAULTS['grace_days']
  TYPE t_numbers IS TABLE OF NUMBER;
  TYPE t_texts IS TABLE OF dbm_items.user_key%TYPE;
  v_now   TIMESTAMP := SYS_EXTRACT_UTC(SYSTIMESTAMP);
  v_ids   t_numbers;
  v_done  t_numbers;
  v_sizes t_numbers;
  v_orgs  t_texts;
  v_users t_texts;
  CURSOR c_expiring IS
    SELECT i.item_id FROM dbm_items i
     WHERE {_expire("i", "v_now", "oracle")}
       FOR UPDATE SKIP LOCKED;
  CURSOR c_purgeable IS
    SELECT i.item_id FROM dbm_items i
     WHERE {_oracle_purge("i")}
       FOR UPDATE SKIP LOCKED;
BEGIN
  p_expired := 0;
  p_purged := 0;
  LOOP
    OPEN c_expiring;
    FETCH c_expiring BULK COLLECT INTO v_ids LIMIT c_batch_size;
    CLOSE c_expiring;
    EXIT WHEN v_ids.COUNT = 0;
    FORALL i IN 1 .. v_ids.COUNT
      UPDATE dbm_items it SET it.deleted_at = v_now, it.version_no = it.version_no + 1
       WHERE it.item_id = v_ids(i) AND {_expire("it", "v_now", "oracle")}
      RETURNING it.item_id, it.org_id, it.user_key, it.char_count
        BULK COLLECT INTO v_done, v_orgs, v_users, v_sizes;
    FORALL i IN 1 .. v_done.COUNT
      INSERT INTO dbm_audit_events {_AUDIT_COLUMNS}
      VALUES (v_orgs(i), v_users(i), v_done(i), 'item_expire', '{EXPIRY_ACTOR}', v_sizes(i), 0, v_now);
    COMMIT;
    p_expired := p_expired + v_done.COUNT;
    EXIT WHEN v_ids.COUNT < c_batch_size;
  END LOOP;
  LOOP
    OPEN c_purgeable;
    FETCH c_purgeable BULK COLLECT INTO v_ids LIMIT c_batch_size;
    CLOSE c_purgeable;
    EXIT WHEN v_ids.COUNT = 0;
    FORALL i IN 1 .. v_ids.COUNT
      DELETE FROM dbm_items it
       WHERE it.item_id = v_ids(i) AND {_oracle_purge("it")}
      RETURNING it.item_id, it.org_id, it.user_key, it.char_count
        BULK COLLECT INTO v_done, v_orgs, v_users, v_sizes;
    FORALL i IN 1 .. v_done.COUNT
      INSERT INTO dbm_audit_events {_AUDIT_COLUMNS}
      VALUES (v_orgs(i), v_users(i), v_done(i), 'item_purge', '{EXPIRY_ACTOR}', v_sizes(i), NULL, v_now);
    COMMIT;
    p_purged := p_purged + v_done.COUNT;
    EXIT WHEN v_ids.COUNT < c_batch_size;
  END LOOP;
END {ITEMS_PROC};"""


def _pg_purge(alias: str) -> str:
    grace = _grace(alias, "s.setting_value::integer")
    return f"{alias}.deleted_at IS NOT NULL\n               AND {alias}.deleted_at <= v_now - make_interval(days => {grace})"


_PG = f"""CREATE OR REPLACE PROCEDURE {ITEMS_PROC}(
    INOUT p_expired bigint DEFAULT NULL,
    INOUT p_purged bigint DEFAULT NULL
)
LANGUAGE plpgsql
AS $proc$
-- {_COMMENT.replace(chr(10) + "  --", chr(10) + "--")}
DECLARE
    c_batch_size CONSTANT integer := {BATCH};
    c_grace_days CONSTANT integer := {_GRACE}; -- dbmemory.items.settings.DEFAULTS['grace_days']
    v_now timestamptz := clock_timestamp();
    v_batch bigint;
BEGIN
    p_expired := 0;
    p_purged := 0;
    LOOP
        WITH doomed AS (
            SELECT i.item_id FROM dbm_items i
             WHERE {_expire("i", "v_now", "postgresql")}
             ORDER BY i.item_id
             LIMIT c_batch_size
               FOR UPDATE OF i SKIP LOCKED
        ), done AS (
            UPDATE dbm_items i SET deleted_at = v_now, version_no = i.version_no + 1
              FROM doomed d
             WHERE i.item_id = d.item_id AND {_expire("i", "v_now", "postgresql")}
            RETURNING i.item_id, i.org_id, i.user_key, i.char_count
        )
        INSERT INTO dbm_audit_events {_AUDIT_COLUMNS}
        SELECT g.org_id, g.user_key, g.item_id, 'item_expire', '{EXPIRY_ACTOR}', g.char_count, 0, v_now
          FROM done g ORDER BY g.item_id;
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        COMMIT;
        EXIT WHEN v_batch = 0;
        p_expired := p_expired + v_batch;
    END LOOP;
    LOOP
        WITH doomed AS (
            SELECT i.item_id FROM dbm_items i
             WHERE {_pg_purge("i")}
             ORDER BY i.item_id
             LIMIT c_batch_size
               FOR UPDATE OF i SKIP LOCKED
        ), done AS (
            DELETE FROM dbm_items i USING doomed d
             WHERE i.item_id = d.item_id AND {_pg_purge("i")}
            RETURNING i.item_id, i.org_id, i.user_key, i.char_count
        )
        INSERT INTO dbm_audit_events {_AUDIT_COLUMNS}
        SELECT g.org_id, g.user_key, g.item_id, 'item_purge', '{EXPIRY_ACTOR}', g.char_count, NULL, v_now
          FROM done g ORDER BY g.item_id;
        GET DIAGNOSTICS v_batch = ROW_COUNT;
        COMMIT;
        EXIT WHEN v_batch = 0;
        p_purged := p_purged + v_batch;
    END LOOP;
END
$proc$"""


def _my_purge(alias: str) -> str:
    grace = _grace(alias, "CAST(s.setting_value AS SIGNED)")
    return f"{alias}.deleted_at IS NOT NULL\n               AND {alias}.deleted_at <= v_now - INTERVAL {grace} DAY"


_MY_BATCH_INSERT = "INSERT INTO dbm_item_batch (item_id, org_id, user_key, char_count)"

_MYSQL = f"""CREATE PROCEDURE {ITEMS_PROC}(OUT p_expired BIGINT, OUT p_purged BIGINT)
    MODIFIES SQL DATA
    COMMENT 'dbmemory: expire memory items by class, purge deleted ones after the grace period'
BEGIN
    -- {_COMMENT.replace(chr(10) + "  --", chr(10) + "    --")}
    DECLARE c_batch_size INT DEFAULT {BATCH};
    DECLARE c_grace_days INT DEFAULT {_GRACE}; -- dbmemory.items.settings.DEFAULTS['grace_days']
    DECLARE v_now DATETIME(6);
    DECLARE v_batch BIGINT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        DROP TEMPORARY TABLE IF EXISTS dbm_item_batch;
        RESIGNAL;
    END;
    SET v_now = UTC_TIMESTAMP(6);
    SET p_expired = 0;
    SET p_purged = 0;
    DROP TEMPORARY TABLE IF EXISTS dbm_item_batch;
    CREATE TEMPORARY TABLE dbm_item_batch (
        item_id BIGINT NOT NULL PRIMARY KEY,
        org_id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        user_key VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NULL,
        char_count INT NULL
    );
    expire_loop: LOOP
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        DELETE FROM dbm_item_batch;
        {_MY_BATCH_INSERT}
            SELECT i.item_id, i.org_id, i.user_key, i.char_count FROM dbm_items i
             WHERE {_expire("i", "v_now", "mysql")}
             ORDER BY i.item_id
             LIMIT c_batch_size
               FOR UPDATE SKIP LOCKED;
        UPDATE dbm_items i JOIN dbm_item_batch b ON b.item_id = i.item_id
           SET i.deleted_at = v_now, i.version_no = i.version_no + 1
         WHERE {_expire("i", "v_now", "mysql")};
        -- keep in the batch only what this run soft-deleted
        DELETE b FROM dbm_item_batch b JOIN dbm_items i ON i.item_id = b.item_id
         WHERE i.deleted_at IS NULL OR i.deleted_at <> v_now;
        INSERT INTO dbm_audit_events {_AUDIT_COLUMNS}
        SELECT b.org_id, b.user_key, b.item_id, 'item_expire', '{EXPIRY_ACTOR}', b.char_count, 0, v_now
          FROM dbm_item_batch b ORDER BY b.item_id;
        SET v_batch = ROW_COUNT();
        COMMIT;
        IF v_batch = 0 THEN
            LEAVE expire_loop;
        END IF;
        SET p_expired = p_expired + v_batch;
    END LOOP expire_loop;
    purge_loop: LOOP
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        START TRANSACTION;
        DELETE FROM dbm_item_batch;
        {_MY_BATCH_INSERT}
            SELECT i.item_id, i.org_id, i.user_key, i.char_count FROM dbm_items i
             WHERE {_my_purge("i")}
             ORDER BY i.item_id
             LIMIT c_batch_size
               FOR UPDATE SKIP LOCKED;
        DELETE i FROM dbm_items i JOIN dbm_item_batch b ON b.item_id = i.item_id
         WHERE {_my_purge("i")};
        -- keep in the batch only what is really gone
        DELETE b FROM dbm_item_batch b JOIN dbm_items i ON i.item_id = b.item_id;
        INSERT INTO dbm_audit_events {_AUDIT_COLUMNS}
        SELECT b.org_id, b.user_key, b.item_id, 'item_purge', '{EXPIRY_ACTOR}', b.char_count, NULL, v_now
          FROM dbm_item_batch b ORDER BY b.item_id;
        SET v_batch = ROW_COUNT();
        COMMIT;
        IF v_batch = 0 THEN
            LEAVE purge_loop;
        END IF;
        SET p_purged = p_purged + v_batch;
    END LOOP purge_loop;
    DROP TEMPORARY TABLE IF EXISTS dbm_item_batch;
END"""


def item_procedure_sql(dialect: str) -> str:
    """The ``CREATE`` statement of ``dbm_expire_items`` on ``dialect`` (no client delimiter).

    Signatures: Oracle ``dbm_expire_items(p_expired OUT NUMBER, p_purged OUT NUMBER)``;
    PostgreSQL ``CALL dbm_expire_items()`` (two INOUT bigint); MySQL/MariaDB
    ``CALL dbm_expire_items(@expired, @purged)``.

    Raises:
        ValueError: unknown dialect.
    """
    try:
        return {"oracle": _ORACLE, "postgresql": _PG, "mysql": _MYSQL}[dialect]
    except KeyError:
        raise ValueError(f"dialect {dialect!r} must be one of oracle, postgresql, mysql") from None


def items_call(dialect: str) -> str:
    """The statement (inside ``dbm_expire_files``) that runs the items' retention."""
    return {
        "oracle": f"  {ITEMS_PROC}(v_items_expired, v_items_purged);",
        "postgresql": f"    CALL {ITEMS_PROC}(v_items_expired, v_items_purged);",
        "mysql": f"    CALL {ITEMS_PROC}(v_items_expired, v_items_purged);",
    }[dialect]
