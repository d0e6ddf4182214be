"""Squatters for the servers' tests: a real socket on an address a server of the run meant to
use, recording every connection and every byte it receives (nothing must reach it)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path


class Squatter:
    """Listens on a loopback TCP port (``family`` AF_INET) or a Unix socket path; answers
    every request ``200 {}`` (a health check passes), and keeps what it was sent."""

    def __init__(self, path: str | Path | None = None) -> None:
        if path is None:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
            self.port = self.sock.getsockname()[1]
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(str(path))
        self.sock.listen(16)
        self.connections = 0
        self.received = b""
        self._lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(2.0)
        with conn:
            try:
                while data := conn.recv(65536):
                    with self._lock:
                        self.received += data
                    if b"\r\n\r\n" in data:
                        body = b"{}"
                        conn.sendall(
                            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 2\r\nConnection: close\r\n\r\n" + body
                        )
                        return
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
