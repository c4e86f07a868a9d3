"""A recording TCP proxy for wire-capture tests: forwards bytes both ways and keeps a copy.

Listens on loopback, connects each accepted client to ``target`` and appends every byte it
relays (either direction) to :attr:`captured`. Used by tests/integration to prove that no raw
value crosses the wire in ``--insecure`` mode.
"""

from __future__ import annotations

import socket
import threading


class RecordingProxy:
    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1"):
        self._target = (target_host, target_port)
        self._listener = socket.create_server((listen_host, 0))
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._captured = bytearray()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []

    @property
    def captured(self) -> bytes:
        with self._lock:
            return bytes(self._captured)

    def start(self) -> RecordingProxy:
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def _accept_loop(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                t = threading.Thread(target=self._pump, args=(src, dst), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        src.settimeout(0.5)
        try:
            while not self._stop.is_set():
                try:
                    data = src.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                with self._lock:
                    self._captured += data
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> None:
        """Stop accepting and relaying, close every connection and wait for the pump threads."""
        self._stop.set()
        self._listener.close()
        for t in self._threads:
            t.join(timeout=2)
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            s.close()
