"""Issue-12 views of the bench: store size (20 -> 1,000 files), one shared store under 1-8
concurrent workers, and the network-latency view (a userspace TCP delay proxy on loopback).

Every figure here is a ratio taken within one run (lib and floor alternating, or one worker
count right after the other), so machine load hits both sides alike.
"""

from __future__ import annotations

import select
import socket
import statistics
import threading
import time
from typing import Any, Callable

from sqlalchemy.engine import Engine, make_url

from floor import Floor


def _p50(ns: list[int]) -> float:
    return statistics.median(ns) / 1000 if ns else float("nan")


def _tool_call(conn: Any, tool: Any, args: dict[str, Any]) -> str:
    from dbmemory.store.units import mark_single_unit

    with conn.begin() as trans:
        mark_single_unit(conn, trans)
        out = tool.execute(args)
    if out.startswith("Error"):
        raise RuntimeError(f"{args['command']} failed: {out[:200]}")
    return out


def _prefill(engine: Engine, store_key: str, n: int) -> None:
    from dbmemory.core.model import StoreRef
    from dbmemory.store import files as files_api

    ref = StoreRef(store_key=store_key, scope="shared", store_code=store_key.split(":", 1)[1])
    with engine.begin() as c:
        for j in range(n):
            files_api.put_file(c, ref, f"/memories/fill/f{j:04d}.md", f"# note {j}\n- fact\n" * 4)


def store_size(engine: Engine, floor: Floor, sizes: tuple[int, ...] = (20, 1000),
               samples: int = 60) -> dict[str, Any]:
    """p50 of ``create`` (then an untimed delete, so the size stays) and of ``view /memories``
    in a shared store of each size, lib and floor alternating."""
    from dbmemory import MemoryTool, enable_for_agent

    out: dict[str, Any] = {}
    for size in sizes:
        code = f"SIZE{size}"
        with engine.begin() as c:
            enable_for_agent(c, f"SZ{size}", scope="shared", store_code=code, max_files=size + 10)
        key = f"shared:{code}"
        fkey = f"shared:floorsize{size}"
        _prefill(engine, key, size - 1)
        _prefill(engine, fkey, size - 1)
        rec: dict[str, list[int]] = {k: [] for k in ("lib create", "floor create", "lib view", "floor view")}
        with engine.connect() as conn:
            tool = MemoryTool(conn, f"SZ{size}")
            conn.commit()
            for i in range(samples + 3):
                path = f"/memories/new/n{i:04d}.md"
                text = "# new\n- remembered\n" * 20
                t0 = time.perf_counter_ns()
                _tool_call(conn, tool, {"command": "create", "path": path, "file_text": text})
                t1 = time.perf_counter_ns()
                floor.create(fkey, path, text, max_files=size + 10)
                t2 = time.perf_counter_ns()
                # Each timed command follows a write by the other side's connection (on SQLite
                # that empties the reader's page cache), so neither side reads a warmer cache.
                _tool_call(conn, tool, {"command": "view", "path": "/memories"})
                t3 = time.perf_counter_ns()
                _tool_call(conn, tool, {"command": "delete", "path": path})
                t4 = time.perf_counter_ns()
                floor.view_dir(fkey)
                t5 = time.perf_counter_ns()
                floor.delete(fkey, path)
                if i >= 3:
                    rec["lib create"].append(t1 - t0)
                    rec["floor create"].append(t2 - t1)
                    rec["lib view"].append(t3 - t2)
                    rec["floor view"].append(t5 - t4)
        out[str(size)] = {k: _p50(v) for k, v in rec.items()}
    return out


def concurrency(engine: Engine, workers: tuple[int, ...] = (1, 2, 4, 8), ops: int = 60) -> dict[str, Any]:
    """One shared store, ``w`` threads each with its own connection and tool, each editing its
    own file (str_replace back and forth) ``ops`` times: p50 and p99 of a call per count."""
    from dbmemory import MemoryTool, enable_for_agent

    ops += ops % 2  # an even number of edits leaves each file as it started
    with engine.begin() as c:
        enable_for_agent(c, "CONC", scope="shared", store_code="CONC")
    out: dict[str, Any] = {}
    with engine.connect() as conn:
        tool = MemoryTool(conn, "CONC")
        conn.commit()
        for w in range(max(workers)):
            _tool_call(conn, tool, {"command": "create", "path": f"/memories/w{w}.md", "file_text": "state: a\n"})
    for count in workers:
        times: list[int] = []
        lock = threading.Lock()
        errors: list[str] = []
        barrier = threading.Barrier(count)

        def worker(w: int) -> None:
            mine: list[int] = []
            try:
                with engine.connect() as c:
                    t = MemoryTool(c, "CONC")
                    c.commit()
                    barrier.wait(timeout=60)
                    for k in range(ops):
                        old, new = ("state: a", "state: b") if k % 2 == 0 else ("state: b", "state: a")
                        t0 = time.perf_counter_ns()
                        _tool_call(c, t, {"command": "str_replace", "path": f"/memories/w{w}.md",
                                          "old_str": old, "new_str": new})
                        mine.append(time.perf_counter_ns() - t0)
            except Exception as exc:  # noqa: BLE001
                errors.append(repr(exc)[:200])
            with lock:
                times.extend(mine)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(w,)) for w in range(count)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        s = sorted(times)
        out[str(count)] = {
            "p50_us": _p50(s),
            "p99_us": s[int(0.99 * (len(s) - 1))] / 1000 if s else None,
            "ops_per_s": len(s) / wall if wall else None,
            "errors": errors[:3],
        }
    return out


class DelayProxy:
    """A userspace TCP proxy on loopback that holds every chunk for ``delay_s`` before passing
    it on, in both directions: about one ``delay_s`` per direction, so a request/response
    round trip costs ``2 * delay_s`` more (the bench uses ``delay_s = rtt / 2``)."""

    def __init__(self, target_host: str, target_port: int, delay_s: float) -> None:
        self.target = (target_host, target_port)
        self.delay = delay_s
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        self.server.settimeout(0.2)
        while not self.stop.is_set():
            try:
                client, _ = self.server.accept()
            except OSError:
                continue
            upstream = socket.create_connection(self.target)
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self.stop.is_set():
                ready, _, _ = select.select([src], [], [], 0.2)
                if not ready:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                time.sleep(self.delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.server.close()


def latency_view(kind: str, url: str, rtt_ms: float = 0.5, samples: int = 40) -> dict[str, Any]:
    """p50 per command, lib and floor alternating, through a delay proxy adding ``rtt_ms`` per
    round trip (PostgreSQL and MariaDB)."""
    from dbmemory import MemoryTool, enable_for_agent
    from dbmemory.db.engine import create_engine

    parsed = make_url(url)
    default_port = 5432 if kind == "postgresql" else 3306
    proxy = DelayProxy(parsed.host or "127.0.0.1", parsed.port or default_port, rtt_ms / 2000)
    proxied = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    engine = create_engine(proxied)
    floor = Floor(kind, proxied)
    rec: dict[str, list[int]] = {}
    try:
        with engine.begin() as c:
            enable_for_agent(c, "LAT", scope="shared", store_code="LAT")
        with engine.connect() as conn:
            tool = MemoryTool(conn, "LAT")
            conn.commit()
            for i in range(samples + 2):
                path = f"/memories/l/n{i:03d}.md"
                text = "# note\n- status: open\n" + "- a remembered fact\n" * 10
                steps: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
                    ("create", lambda: _tool_call(conn, tool, {"command": "create", "path": path, "file_text": text}),
                     lambda: floor.create("shared:floorlat", path, text)),
                    ("view file", lambda: _tool_call(conn, tool, {"command": "view", "path": path}),
                     lambda: floor.view_file("shared:floorlat", path)),
                    ("str_replace", lambda: _tool_call(conn, tool, {"command": "str_replace", "path": path,
                                                                      "old_str": "status: open", "new_str": "status: done"}),
                     lambda: floor.str_replace("shared:floorlat", path, "status: open", "status: done")),
                    ("delete", lambda: _tool_call(conn, tool, {"command": "delete", "path": path}),
                     lambda: floor.delete("shared:floorlat", path)),
                ]
                for name, lib, flo in steps:
                    t0 = time.perf_counter_ns()
                    lib()
                    t1 = time.perf_counter_ns()
                    flo()
                    t2 = time.perf_counter_ns()
                    if i >= 2:
                        rec.setdefault(f"lib {name}", []).append(t1 - t0)
                        rec.setdefault(f"floor {name}", []).append(t2 - t1)
    finally:
        floor.close()
        engine.dispose()
        proxy.close()
    return {"rtt_ms": rtt_ms, **{k: _p50(v) for k, v in rec.items()}}
