"""The floor: each benchmarked operation as the minimal hand-written SQL on the raw DB-API driver.

Same schema, same database, same driver the library uses (``sqlite3``, ``psycopg``, ``PyMySQL``),
no SQLAlchemy and no dbmemory code on the path. Each operation keeps the guarantees the library
gives for it, with as few statements as the SQL allows:

* reads address the store by its key (a scalar subquery), as a stateless caller would: one
  statement;
* ``str_replace``/``insert`` lock the file row (``FOR UPDATE``), update it and write the audit
  event: three statements (no store lock: the default caps have no per-store character cap);
* ``create`` locks the store row and reads the cap/shape facts in one statement, inserts the
  file and the audit event: three statements (four for a store's first file, which also inserts
  the store row);
* ``rename`` locks store and file rows in one statement, checks the destination, moves the row
  and writes the audit event: four statements;
* ``delete`` is ``DELETE ... RETURNING`` plus the audit event: two statements;
* expiry selects a batch of 1,000 expired ids, deletes them and inserts their audit events with
  one multi-row statement, one transaction per batch (what ``expire_files_committing`` does).

Each operation also produces the minimal equivalent answer in Python (numbered lines for a file
view, ``size<TAB>path`` lines for a listing), so the comparison is operation for operation.
Transactions: SQLite ``BEGIN IMMEDIATE`` ... ``COMMIT`` (WAL, ``synchronous=NORMAL``, as the
library's engine set-up), PostgreSQL and MariaDB the driver's implicit transaction and
``commit()``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from sqlalchemy.engine import make_url

ACTOR = "floor"
STORE_ID = "SELECT s.store_id FROM dbm_stores s WHERE s.store_key = %s"
"""The store id by key as a scalar subquery: with it the plan is two index look-ups even
when PostgreSQL switches to a generic plan for the (auto-)prepared statement, which a join
written as ``JOIN dbm_stores`` does not guarantee."""


def path_hash(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8")).hexdigest()


def ancestors(path: str) -> list[str]:
    parts = path[len("/memories/") :].split("/")
    return ["/memories/" + "/".join(parts[:d]) for d in range(1, len(parts))]


class Floor:
    """A raw DB-API connection that runs the benchmark operations as minimal SQL."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind = kind
        parsed = make_url(url)
        if kind == "sqlite":
            import sqlite3

            self.conn = sqlite3.connect(parsed.database, isolation_level=None, check_same_thread=False)
            for pragma in (
                "PRAGMA busy_timeout = 30000",
                "PRAGMA foreign_keys = ON",
                "PRAGMA journal_mode = WAL",
                "PRAGMA synchronous = NORMAL",
            ):
                self.conn.execute(pragma)
            self.ph = "?"
            self.lock = ""
        elif kind == "postgresql":
            import psycopg

            self.conn = psycopg.connect(
                host=parsed.host,
                port=parsed.port or 5432,
                user=parsed.username,
                password=parsed.password or None,
                dbname=parsed.database,
            )
            self.ph = "%s"
            self.lock = " FOR UPDATE"
        else:
            import pymysql

            self.conn = pymysql.connect(
                host=parsed.host,
                port=parsed.port or 3306,
                user=parsed.username,
                password=parsed.password or "",
                database=parsed.database,
                charset="utf8mb4",
                autocommit=False,
            )
            self.ph = "%s"
            self.lock = " FOR UPDATE"
        self.cur = self.conn.cursor()
        self.store_ids: dict[str, int] = {}
        self.statements = 0

    # -- plumbing ----------------------------------------------------------------------------

    def sql(self, text: str) -> str:
        return text.replace("%s", "?") if self.ph == "?" else text

    def q(self, text: str, params: tuple[Any, ...] = ()) -> Any:
        self.statements += 1
        self.cur.execute(self.sql(text), params)
        return self.cur

    def begin(self) -> None:
        if self.kind == "sqlite":
            self.cur.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        if self.kind == "sqlite":
            self.cur.execute("COMMIT")
        else:
            self.conn.commit()

    def rollback(self) -> None:
        if self.kind == "sqlite":
            if self.conn.in_transaction:
                self.cur.execute("ROLLBACK")
        else:
            self.conn.rollback()

    def ts(self, value: dt.datetime) -> Any:
        if self.kind == "postgresql":
            return value
        if self.kind == "sqlite":
            return value.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
        return value.replace(tzinfo=None)

    def now(self) -> Any:
        return self.ts(dt.datetime.now(dt.timezone.utc))

    def close(self) -> None:
        try:
            self.rollback()
        finally:
            self.conn.close()

    def _audit(self, store_id: int, key: str, path: str, action: str, before: Any, after: Any,
               now: Any, detail: str | None = None) -> None:
        self.q(
            "INSERT INTO dbm_audit_events (store_id, store_key, file_path, action_name, actor_name,"
            " chars_before, chars_after, detail_text, created_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (store_id, key, path, action, ACTOR, before, after, detail, now),
        )

    # -- operations (each one transaction) -----------------------------------------------------

    def create(self, key: str, path: str, text: str, max_files: int = 1000) -> str:
        self.begin()
        now = self.now()
        h = path_hash(path)
        anc = [path_hash(a) for a in ancestors(path)] or ["-"]
        n = len(path) + 1
        marks = ", ".join(["%s"] * len(anc))
        row = self.q(
            "SELECT s.store_id,"
            " (SELECT count(*) FROM dbm_files f WHERE f.store_id = s.store_id),"
            " (SELECT count(*) FROM dbm_files f WHERE f.store_id = s.store_id AND"
            f"  (f.path_hash = %s OR f.path_hash IN ({marks}) OR substr(f.file_path, 1, %s) = %s))"
            f" FROM dbm_stores s WHERE s.store_key = %s{self.lock}",
            (h, *anc, n, path + "/", key),
        ).fetchone()
        if row is None:
            self.q(
                "INSERT INTO dbm_stores (store_key, scope_name, agent_code, store_code, created_at,"
                " updated_at) VALUES (%s, %s, %s, %s, %s, %s)",
                (key, "shared", None, key.split(":", 1)[1], now, now),
            )
            store_id = self.cur.lastrowid if self.kind != "postgresql" else None
            if store_id is None:
                store_id = self.q(
                    "SELECT store_id FROM dbm_stores WHERE store_key = %s", (key,)
                ).fetchone()[0]
            count, clash = 0, 0
        else:
            store_id, count, clash = row
        if clash or count + 1 > max_files:
            self.rollback()
            return "Error: exists or cap"
        self.q(
            "INSERT INTO dbm_files (store_id, file_path, path_hash, body, char_count, version_no,"
            " expiry_exempt, created_at, updated_at, last_accessed_at)"
            " VALUES (%s, %s, %s, %s, %s, 1, %s, %s, %s, %s)",
            (store_id, path, h, text, len(text), False, now, now, now),
        )
        self._audit(store_id, key, path, "create", None, len(text), now)
        self.commit()
        return f"File created successfully at: {path}"

    def view_dir(self, key: str) -> str:
        self.begin()
        rows = self.q(
            "SELECT f.file_path, f.char_count FROM dbm_files f"
            f" WHERE f.store_id = ({STORE_ID})",
            (key,),
        ).fetchall()
        self.commit()
        rows = sorted(rows)
        return "\n".join(f"{size}\t{path}" for path, size in rows)

    def view_file(self, key: str, path: str) -> str:
        self.begin()
        row = self.q(
            "SELECT f.file_id, f.body, f.last_accessed_at FROM dbm_files f"
            f" WHERE f.store_id = ({STORE_ID}) AND f.path_hash = %s",
            (key, path_hash(path)),
        ).fetchone()
        self.commit()
        text = row[1] or ""
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        return "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(lines, 1))

    def _edit(self, key: str, path: str, action: str, change: Any) -> str:
        self.begin()
        row = self.q(
            "SELECT f.file_id, f.store_id, f.body, f.version_no, f.char_count FROM dbm_files f"
            f" WHERE f.store_id = ({STORE_ID}) AND f.path_hash = %s{self.lock}",
            (key, path_hash(path)),
        ).fetchone()
        file_id, store_id, body, version, chars = row
        new = change(body or "")
        if new is None:
            self.rollback()
            return "Error: no change"
        now = self.now()
        self.q(
            "UPDATE dbm_files SET body = %s, char_count = %s, version_no = %s, updated_at = %s,"
            " last_accessed_at = %s WHERE file_id = %s",
            (new, len(new), version + 1, now, now, file_id),
        )
        self._audit(store_id, key, path, action, chars, len(new), now)
        self.commit()
        return "The memory file has been edited."

    def str_replace(self, key: str, path: str, old: str, new: str) -> str:
        def change(text: str) -> str | None:
            if old == "" or text.count(old) != 1:
                return None
            return text.replace(old, new, 1)

        return self._edit(key, path, "str_replace", change)

    def insert(self, key: str, path: str, line: int, insert_text: str) -> str:
        def change(text: str) -> str | None:
            lines = text.split("\n")
            if line > len(lines):
                return None
            block = insert_text if insert_text.endswith("\n") else insert_text + "\n"
            offset = sum(len(x) + 1 for x in lines[:line])
            return text[:offset] + block + text[offset:]

        return self._edit(key, path, "insert", change)

    def rename(self, key: str, old: str, new: str) -> str:
        self.begin()
        row = self.q(
            "SELECT f.file_id, f.store_id, f.version_no, f.char_count FROM dbm_stores s"
            " JOIN dbm_files f ON f.store_id = s.store_id"
            f" WHERE s.store_key = %s AND f.path_hash = %s{self.lock}",
            (key, path_hash(old)),
        ).fetchone()
        file_id, store_id, version, chars = row
        anc = [path_hash(a) for a in ancestors(new)] or ["-"]
        marks = ", ".join(["%s"] * len(anc))
        clash = self.q(
            "SELECT count(*) FROM dbm_files WHERE store_id = %s AND (path_hash = %s OR"
            f" path_hash IN ({marks}) OR substr(file_path, 1, %s) = %s)",
            (store_id, path_hash(new), *anc, len(new) + 1, new + "/"),
        ).fetchone()[0]
        if clash:
            self.rollback()
            return "Error: destination exists"
        now = self.now()
        self.q(
            "UPDATE dbm_files SET file_path = %s, path_hash = %s, version_no = %s, updated_at = %s,"
            " last_accessed_at = %s WHERE file_id = %s",
            (new, path_hash(new), version + 1, now, now, file_id),
        )
        self._audit(store_id, key, old, "rename", chars, chars, now, new)
        self.commit()
        return f"Successfully renamed {old} to {new}"

    def delete(self, key: str, path: str) -> str:
        self.begin()
        now = self.now()
        row = self.q(
            "DELETE FROM dbm_files WHERE store_id = (SELECT store_id FROM dbm_stores"
            " WHERE store_key = %s) AND path_hash = %s RETURNING store_id, char_count",
            (key, path_hash(path)),
        ).fetchone()
        self._audit(row[0], key, path, "delete", row[1], None, now)
        self.commit()
        return f"Successfully deleted {path}"

    def expire(self, cutoff: dt.datetime, batch: int = 1000) -> int:
        """Delete every non-exempt file untouched since ``cutoff``; one transaction per batch."""
        total = 0
        while True:
            self.begin()
            now = self.now()
            rows = self.q(
                "SELECT f.file_id, f.store_id, s.store_key, f.file_path, f.char_count"
                " FROM dbm_files f JOIN dbm_stores s ON s.store_id = f.store_id"
                " WHERE f.last_accessed_at < %s AND f.expiry_exempt = %s"
                f" ORDER BY f.file_id LIMIT {int(batch)}",
                (self.ts(cutoff), False),
            ).fetchall()
            if rows:
                marks = ", ".join(["%s"] * len(rows))
                self.q(f"DELETE FROM dbm_files WHERE file_id IN ({marks})", tuple(r[0] for r in rows))
                values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
                params: list[Any] = []
                for _fid, sid, skey, fpath, chars in rows:
                    params += [sid, skey, fpath, "expire", "expiry", chars, None, now]
                self.q(
                    "INSERT INTO dbm_audit_events (store_id, store_key, file_path, action_name,"
                    f" actor_name, chars_before, chars_after, created_at) VALUES {values}",
                    tuple(params),
                )
            self.commit()
            total += len(rows)
            if len(rows) < batch:
                return total
