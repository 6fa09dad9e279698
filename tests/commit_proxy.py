"""A TCP proxy between dbmemory and a real PostgreSQL or MariaDB server that cuts a connection at
its ``COMMIT`` (threads and sockets, nothing else).

Armed with :meth:`CommitCutProxy.cut_next_commit`, the proxy watches what clients send; the first
``COMMIT`` message (PostgreSQL simple or extended query ``COMMIT``, MySQL ``COM_QUERY COMMIT``)
is handled by the mode:

* ``"before"``: the message is dropped and both sides of that connection are closed: the server
  never receives the ``COMMIT`` and rolls the transaction back;
* ``"after"``: the message goes to the server; its reply (sent once the server has committed) is
  dropped and both sides are closed: the change is saved, the client never hears it.

Every other connection (and every later one: dbmemory's reconnects) is passed through untouched.
"""

from __future__ import annotations

import re
import socket
import threading
from typing import Literal

__all__ = ["CommitCutProxy"]

_PG_COMMIT = re.compile(rb"[QP][\x00-\xff]{4}(?:[^\x00]*\x00)?COMMIT\x00")
"""A PostgreSQL ``Query`` or ``Parse`` message whose statement is exactly ``COMMIT``."""


def _is_commit(data: bytes) -> bool:
    if len(data) >= 11 and data[4:] == b"\x03COMMIT":  # MySQL: 3-byte length, sequence, COM_QUERY
        return True
    return bool(_PG_COMMIT.search(data))


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.drop_replies = False
        self.seen = False
        self.lock = threading.Lock()

    def close(self) -> None:
        for sock in (self.client, self.server):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


class CommitCutProxy:
    """Listens on 127.0.0.1 (:attr:`port`) and forwards to ``host:port``.

    Attributes:
        port: the port to connect to instead of the server's.
        cuts: how many connections were cut at a ``COMMIT`` so far.
    """

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.cuts = 0
        self._mode: Literal["before", "after"] | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._refuse = False
        self._after: bytes | None = None
        self._pairs: list[_Pair] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_next_commit(self, mode: Literal["before", "after"], *, after: bytes | None = None) -> None:
        """Cut the connection of the next ``COMMIT`` any client sends, ``mode`` as above; with
        ``after``, only a ``COMMIT`` on a connection that sent those bytes since (e.g. a table
        name: skips the ``COMMIT`` a driver sends when it sets the isolation level)."""
        with self._lock:
            self._mode = mode
            self._after = after
            for pair in self._pairs:
                pair.seen = False

    def refuse_new_connections(self) -> None:
        """Close every connection accepted from now on at once (the server looks unreachable)."""
        self._refuse = True

    def disarm(self) -> None:
        with self._lock:
            self._mode = None

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for pair in self._pairs:
            pair.close()

    def _take_mode(self) -> Literal["before", "after"] | None:
        with self._lock:
            mode, self._mode = self._mode, None
            if mode is not None:
                self.cuts += 1
            return mode

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._refuse:
                client.close()
                continue
            server = socket.create_connection(self._target)
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, server)
            self._pairs.append(pair)
            threading.Thread(target=self._upstream, args=(pair,), daemon=True).start()
            threading.Thread(target=self._downstream, args=(pair,), daemon=True).start()

    def _upstream(self, pair: _Pair) -> None:
        try:
            while data := pair.client.recv(65536):
                if self._after is not None and self._after in data:
                    pair.seen = True
                ready = self._mode is not None and (self._after is None or pair.seen)
                mode = self._take_mode() if ready and _is_commit(data) else None
                if mode == "before":
                    pair.close()
                    return
                if mode == "after":
                    pair.drop_replies = True
                pair.server.sendall(data)
        except OSError:
            pass
        pair.close()

    def _downstream(self, pair: _Pair) -> None:
        try:
            while data := pair.server.recv(65536):
                if pair.drop_replies:  # the server answered the COMMIT: it committed
                    break
                pair.client.sendall(data)
        except OSError:
            pass
        pair.close()
