"""What-if: measure proposed performance fixes without changing ``src/``.

Runs the benchmark workload (bench/workload.py, smaller by default) once on the code as it is
and once with candidate fixes monkeypatched in, each in a fresh process, and prints the change
per operation. The fixes are the recommendations of bench/README.md ("Findings"):

* ``prebuilt``: every hot statement is built once, with ``bindparam()`` placeholders, and
  executed with a parameter dict (no per-call construction, no per-call cache-key walk, no
  result-metadata adaptation). Same SQL, same semantics: only the builders in
  ``dbmemory.statements`` and ``files._audit`` are replaced.
* ``pathcache``: ``normalize_path`` memoised for ``str`` input (it is pure; the tool calls it
  three times per command).
* ``rawbegin``: SQLite's ``BEGIN IMMEDIATE`` sent on the DB-API connection in the ``begin``
  listener instead of through ``Connection.exec_driver_sql``.
* ``viewbykey``: a view by a tool that does not know its store id yet reads by store key with
  one join (1 round trip instead of 2).

Usage::

    python bench/whatif.py --backends sqlite,postgres --stores 40 --files 10
    python bench/whatif.py --fixes prebuilt            # one fix alone
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

ALL_FIXES = ("prebuilt", "pathcache", "rawbegin", "viewbykey")

PATCHES: list[tuple[Any, str, Any, Any]] = []
"""(object, attribute, original, replacement) of every fix; switched on and off per call."""


def patch(obj: Any, name: str, value: Any) -> None:
    PATCHES.append((obj, name, getattr(obj, name), value))


def switch(on: bool) -> None:
    for obj, name, original, value in PATCHES:
        setattr(obj, name, value if on else original)


# -- the fixes -----------------------------------------------------------------------------------


class Bound:
    """A prebuilt statement plus its parameters; executes like the statement it stands for."""

    __slots__ = ("params", "stmt")

    def __init__(self, stmt: Any, params: dict[str, Any]) -> None:
        self.stmt, self.params = stmt, params

    def _execute_on_connection(self, connection: Any, distilled_params: Any, execution_options: Any) -> Any:
        return connection._execute_clauseelement(self.stmt, [self.params], execution_options)

    def limit(self, n: int) -> Bound:
        return Bound(_limited(self.stmt, n), self.params)

    def with_for_update(self, **kwargs: Any) -> Bound:
        return Bound(_locked(self.stmt, tuple(sorted(kwargs.items()))), self.params)


@functools.lru_cache(maxsize=None)
def _limited(stmt: Any, n: int) -> Any:
    return stmt.limit(n)


@functools.lru_cache(maxsize=None)
def _locked(stmt: Any, kwargs: tuple[tuple[str, Any], ...]) -> Any:
    return stmt.with_for_update(**dict(kwargs))


def apply_prebuilt() -> None:
    import sqlalchemy as sa

    from dbmemory import files as files_mod
    from dbmemory import statements as st
    from dbmemory.db.dialect import UtcDateTime
    from dbmemory.db.schema import audit_events, files, stores

    bp = sa.bindparam
    meta = tuple(c for c in st.FILE_COLUMNS if c.name != "body")
    q_store_id = sa.select(stores.c.store_id).where(stores.c.store_key == bp("key"))
    q_lock_key = q_store_id.with_for_update()
    q_lock_id = (
        sa.select(stores.c.store_id, stores.c.store_key, stores.c.scope_name)
        .where(stores.c.store_id == bp("sid"))
        .with_for_update()
    )
    q_file = sa.select(*st.FILE_COLUMNS).where(files.c.store_id == bp("sid"), files.c.path_hash == bp("ph"))
    q_file_lock = q_file.with_for_update()
    q_list = sa.select(*meta).where(files.c.store_id == bp("sid"))
    under = sa.func.substr(files.c.file_path, 1, bp("plen")) == bp("prefix")
    q_list_dir = q_list.where(under)
    q_list_dir_lock = q_list_dir.with_for_update()
    q_list_lock = q_list.with_for_update()
    one, zero = sa.literal(1), sa.literal(0)

    def facts(with_ancestors: bool) -> Any:
        same = sa.case((files.c.path_hash == bp("ph"), one), else_=zero)
        anc = sa.case((files.c.path_hash.in_(bp("anc", expanding=True)), one), else_=zero) if with_ancestors else zero
        desc = sa.case((sa.func.substr(files.c.file_path, 1, bp("plen")) == bp("prefix"), one), else_=zero)
        return sa.select(
            sa.func.count().label("file_count"),
            sa.func.coalesce(sa.func.sum(files.c.char_count), 0).label("total_chars"),
            sa.func.coalesce(sa.func.sum(same), 0).label("same"),
            sa.func.coalesce(sa.func.sum(anc), 0).label("ancestor_files"),
            sa.func.coalesce(sa.func.sum(desc), 0).label("descendants"),
        ).where(files.c.store_id == bp("sid"))

    q_facts = {True: facts(True), False: facts(False)}
    i_file = sa.insert(files)
    i_audit = sa.insert(audit_events)
    ts = UtcDateTime()

    def upd(exempt: bool) -> Any:
        values = dict(body=bp("b_body"), char_count=bp("b_chars"), version_no=bp("b_new"),
                      updated_at=bp("b_now", type_=ts), last_accessed_at=bp("b_now2", type_=ts))
        if exempt:
            values["expiry_exempt"] = bp("b_exempt", type_=sa.Boolean())
        return sa.update(files).where(files.c.file_id == bp("b_id"), files.c.version_no == bp("b_ver")).values(**values)

    u_file = {False: upd(False), True: upd(True)}
    u_move = sa.update(files).where(files.c.file_id == bp("b_id")).values(
        file_path=bp("b_path"), path_hash=bp("b_hash"), version_no=bp("b_new"),
        updated_at=bp("b_now", type_=ts), last_accessed_at=bp("b_now2", type_=ts))
    d_ids = sa.delete(files).where(files.c.file_id.in_(bp("ids", expanding=True)))

    patch(st, "select_store_id", lambda key: Bound(q_store_id, {"key": key}))
    patch(st, "lock_store_by_key", lambda key: Bound(q_lock_key, {"key": key}))
    patch(st, "lock_store_by_id", lambda sid: Bound(q_lock_id, {"sid": sid}))
    patch(st, "select_file", lambda sid, ph, *, for_update=False: Bound(q_file_lock if for_update else q_file, {"sid": sid, "ph": ph}))

    def select_listing(sid: int, directory: str | None = None, *, for_update: bool = False) -> Bound:
        if directory is None:
            return Bound(q_list_lock if for_update else q_list, {"sid": sid})
        prefix = directory.rstrip("/") + "/"
        return Bound(q_list_dir_lock if for_update else q_list_dir, {"sid": sid, "plen": len(prefix), "prefix": prefix})

    patch(st, "select_listing", select_listing)

    def select_write_facts(sid: int, path: str, ph: str, anc: Any) -> Bound:
        prefix = path.rstrip("/") + "/"
        params = {"sid": sid, "ph": ph, "plen": len(prefix), "prefix": prefix}
        if anc:
            params["anc"] = list(anc)
        return Bound(q_facts[bool(anc)], params)

    patch(st, "select_write_facts", select_write_facts)

    def insert_file(sid: int, path: str, ph: str, text: str, now: Any, *, expiry_exempt: bool = False) -> Bound:
        return Bound(i_file, dict(store_id=sid, file_path=path, path_hash=ph, body=text if text != "" else None,
                                  char_count=len(text), version_no=1, expiry_exempt=expiry_exempt,
                                  created_at=now, updated_at=now, last_accessed_at=now))

    patch(st, "insert_file", insert_file)

    def update_file(fid: int, text: str, ver: int, now: Any, *, expiry_exempt: bool | None = None) -> Bound:
        params = dict(b_body=text if text != "" else None, b_chars=len(text), b_new=ver + 1, b_now=now,
                      b_now2=now, b_id=fid, b_ver=ver)
        if expiry_exempt is not None:
            params["b_exempt"] = expiry_exempt
        return Bound(u_file[expiry_exempt is not None], params)

    patch(st, "update_file", update_file)
    patch(st, "move_file", lambda fid, path, h, ver, now: Bound(u_move, dict(b_id=fid, b_path=path, b_hash=h, b_new=ver + 1, b_now=now, b_now2=now)))
    patch(st, "delete_files_by_id", lambda ids: Bound(d_ids, {"ids": list(ids)}))

    def _audit(conn: Any, events: Any) -> None:
        if not events:
            return
        from dbmemory.db import dialect

        now = dialect.utcnow()
        rows = [
            {
                "store_id": e.get("store_id"), "store_key": e.get("store_key"), "file_path": e.get("file_path"),
                "action_name": e["action_name"], "actor_name": (e.get("actor_name") or "unknown")[:500],
                "chars_before": e.get("chars_before"), "chars_after": e.get("chars_after"),
                "detail_text": (e.get("detail_text") or None) and e["detail_text"][:1000], "created_at": now,
            }
            for e in events
        ]
        conn.execute(i_audit, rows)

    patch(files_mod, "_audit", _audit)


def apply_pathcache() -> None:
    from dbmemory import files as files_mod
    from dbmemory import paths
    from dbmemory.tool import args as args_mod

    original = paths.normalize_path
    cached = functools.lru_cache(maxsize=4096)(original)

    def normalize_path(raw: object) -> str:
        if type(raw) is str:
            return cached(raw)
        return original(raw)

    for module in (paths, files_mod, args_mod):
        patch(module, "normalize_path", normalize_path)


def raw_begin_engine(url: str) -> Any:
    """The dbmemory SQLite set-up, with BEGIN IMMEDIATE sent on the DB-API connection."""
    import sqlalchemy as sa

    from dbmemory.db import dialect

    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        for pragma in ("PRAGMA busy_timeout = 30000", "PRAGMA foreign_keys = ON",
                       "PRAGMA journal_mode = WAL", "PRAGMA synchronous = NORMAL"):
            dbapi_conn.execute(pragma)

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.connection.driver_connection.execute("BEGIN IMMEDIATE")

    engine._dbmemory_configured = True
    assert dialect.is_sqlite(engine)
    return engine


def apply_viewbykey() -> None:
    import sqlalchemy as sa

    from dbmemory import files as files_mod
    from dbmemory import statements as st
    from dbmemory.db.schema import files, stores
    from dbmemory.errors import NotFoundError
    from dbmemory.model import StoreRef
    from dbmemory.paths import is_root, path_hash
    from dbmemory.touch import touch_after_read

    bp = sa.bindparam
    # the store id as a scalar subquery (not a join): two index look-ups even under the generic
    # plan PostgreSQL uses once psycopg has auto-prepared the statement
    store_id = sa.select(stores.c.store_id).where(stores.c.store_key == bp("key")).scalar_subquery()
    meta = tuple(c for c in st.FILE_COLUMNS if c.name != "body")
    q_file = sa.select(*st.FILE_COLUMNS).where(files.c.store_id == store_id, files.c.path_hash == bp("ph"))
    q_list = sa.select(*meta).where(files.c.store_id == store_id)
    original = files_mod.read_path

    def read_path(conn: Any, store: Any, path: str) -> Any:
        if not (isinstance(store, StoreRef) and store.store_id is None):
            return original(conn, store, path)
        path = files_mod.normalize_path(path)  # the cached one when pathcache is on
        if is_root(path):
            rows = conn.execute(q_list, {"key": store.store_key}).all()
            return sorted((files_mod._info(r) for r in rows), key=lambda f: f.path)
        row = conn.execute(q_file, {"key": store.store_key, "ph": path_hash(path)}).first()
        if row is not None:
            touch_after_read(conn, row.file_id, row.last_accessed_at)
            return files_mod._record(row)
        sid = files_mod.find_store_id(conn, store.store_key)
        entries = files_mod.list_directory(conn, sid, path) if sid is not None else []
        if entries:
            return entries
        raise NotFoundError(f"the path {path} does not exist")

    patch(files_mod, "read_path", read_path)


# -- the interleaved run ---------------------------------------------------------------------------


def run(args: argparse.Namespace, kind: str) -> dict[str, Any]:
    """Baseline, patched and floor interleaved operation by operation in one process."""
    import random
    import time

    from dbmemory.db.engine import create_engine
    from dbmemory.db.migrate import upgrade
    from dbmemory.tool import MemoryTool

    from floor import Floor
    from run import create_scratch, drop_scratch, scratch_url
    from workload import StatementCounter, file_paths, markdown

    fixes = [f for f in args.fixes.split(",") if f]
    if "prebuilt" in fixes:
        apply_prebuilt()
    if "pathcache" in fixes:
        apply_pathcache()
    if "viewbykey" in fixes:
        apply_viewbykey()
    switch(False)
    lat: dict[tuple[str, str], list[int]] = {}
    rts: dict[tuple[str, str], list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        args.database, args.keep = "dbm_whatif", False
        create_scratch(kind, args)
        url = scratch_url(kind, args, Path(tmp))
        base_engine = create_engine(url)
        upgrade(base_engine)
        fixed_engine = raw_begin_engine(url) if (kind == "sqlite" and "rawbegin" in fixes) else base_engine
        floor = Floor(kind, url)
        conns = {"baseline": base_engine.connect(), "patched": fixed_engine.connect()}
        engines = {"baseline": base_engine, "patched": fixed_engine}
        rng = random.Random(5)
        paths = file_paths(args.files)
        turn = [0]

        def order() -> tuple[str, str]:
            """Alternate which side runs first, so neither profits from the other's warm caches."""
            turn[0] += 1
            return ("baseline", "patched") if turn[0] % 2 else ("patched", "baseline")

        warm = 2
        try:
            def lib(side: str, code: str, op: str, arguments: dict[str, Any], record: bool, fresh: bool = False) -> None:
                switch(side == "patched")
                conn = conns[side]
                counter = StatementCounter(engines[side], conn) if not record else None
                t0 = time.perf_counter_ns()
                if counter is not None:
                    counter.__enter__()
                try:
                    with conn.begin():
                        tool = tools[side] if not fresh else MemoryTool.for_store(conn, code)
                        out = tool.execute(arguments)
                finally:
                    if counter is not None:
                        counter.__exit__()
                t1 = time.perf_counter_ns()
                switch(False)
                if out.startswith("Error"):
                    raise RuntimeError(f"{side} {op}: {out[:200]}")
                if record:
                    lat.setdefault((side, op), []).append(t1 - t0)
                else:
                    rts.setdefault((side, op), []).append(counter.count)

            def flo(op: str, fn: Any, record: bool) -> None:
                t0 = time.perf_counter_ns()
                out = fn()
                t1 = time.perf_counter_ns()
                if out.startswith("Error"):
                    raise RuntimeError(f"floor {op}: {out[:200]}")
                if record:
                    lat.setdefault(("floor", op), []).append(t1 - t0)

            for i in range(args.stores + warm):
                record = i >= warm
                tools = {}
                for side in ("baseline", "patched"):
                    switch(side == "patched")
                    tools[side] = MemoryTool.for_store(conns[side], f"{side[0]}-{i}")
                switch(False)
                key = f"shared:f-{i}"
                texts = [markdown(i, j, rng) for j in range(args.files)]

                def both(op: str, arguments: dict[str, Any], floor_fn: Any) -> None:
                    for side in order():
                        lib(side, f"{side[0]}-{i}", op, arguments, record)
                    flo(op, floor_fn, record)

                for path, text in zip(paths, texts):
                    both("create", {"command": "create", "path": path, "file_text": text},
                         lambda: floor.create(key, path, text))
                both("view directory", {"command": "view", "path": "/memories"}, lambda: floor.view_dir(key))
                for path in paths:
                    both("view file", {"command": "view", "path": path}, lambda: floor.view_file(key, path))
                for j, path in enumerate(paths):
                    old, new = f"status {i}-{j}: open", f"status {i}-{j}: closed"
                    both("str_replace", {"command": "str_replace", "path": path, "old_str": old, "new_str": new},
                         lambda: floor.str_replace(key, path, old, new))
                for j, path in enumerate(paths):
                    note = f"- inserted note {i}-{j}"
                    both("insert", {"command": "insert", "path": path, "insert_line": 2, "insert_text": note},
                         lambda: floor.insert(key, path, 2, note))
                src, dst = paths[0], "/memories/archive/" + paths[0].rsplit("/", 1)[1]
                both("rename", {"command": "rename", "old_path": src, "new_path": dst}, lambda: floor.rename(key, src, dst))
                victim = paths[1 % args.files]
                both("delete", {"command": "delete", "path": victim}, lambda: floor.delete(key, victim))
            # a fresh tool (start of a turn): it does not know its store id yet
            for k in range(args.fresh + warm):
                i = warm + rng.randrange(args.stores)
                record = k >= warm
                path = paths[2 % args.files]
                for op, arguments, floor_fn in (
                    ("fresh tool view directory", {"command": "view", "path": "/memories"}, lambda: floor.view_dir(f"shared:f-{i}")),
                    ("fresh tool view file", {"command": "view", "path": path}, lambda: floor.view_file(f"shared:f-{i}", path)),
                ):
                    for side in order():
                        lib(side, f"{side[0]}-{i}", op, arguments, record, fresh=True)
                    flo(op, floor_fn, record)
        finally:
            switch(False)
            for c in conns.values():
                c.close()
            floor.close()
            base_engine.dispose()
            if fixed_engine is not base_engine:
                fixed_engine.dispose()
            drop_scratch(kind, args)
    out: dict[str, Any] = {}
    for (side, op), ns in lat.items():
        out.setdefault(op, {})[side] = statistics.median(ns) / 1000
    for (side, op), counts in rts.items():
        out.setdefault(op, {})["rt_" + side] = int(statistics.median(counts))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--stores", type=int, default=40)
    p.add_argument("--files", type=int, default=10)
    p.add_argument("--fresh", type=int, default=200, help="fresh-tool view samples")
    p.add_argument("--fixes", default=",".join(ALL_FIXES))
    p.add_argument("--postgres-url", default="postgresql+psycopg://postgres@127.0.0.1:5432/")
    p.add_argument("--mysql-url", default="mysql+pymysql://root@127.0.0.1:3306/")
    args = p.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    names = {"sqlite": "sqlite", "postgres": "postgresql", "postgresql": "postgresql", "mysql": "mysql"}
    print(f"fixes: {args.fixes}; {args.stores} stores x {args.files} files; baseline, patched and floor "
          "interleaved per operation; p50 µs\n")
    print("| backend | operation | baseline | patched | gain | floor | ratio before | ratio after | RT before → after |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for b in args.backends.split(","):
        kind = names[b]
        res = run(args, kind)
        for op, v in res.items():
            if "baseline" not in v:
                continue
            base, new, fl = v["baseline"], v["patched"], v.get("floor")
            print(f"| {kind} | {op} | {base:,.0f} | {new:,.0f} | {100 * (base - new) / base:.0f}% | "
                  f"{fl or 0:,.0f} | {base / fl:.2f} | {new / fl:.2f} | "
                  f"{v.get('rt_baseline', '-')} → {v.get('rt_patched', '-')} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
