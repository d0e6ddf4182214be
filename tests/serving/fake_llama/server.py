"""The fake llama.cpp child: binds a port, reports it on the ready pipe, and serves the fake
endpoint's replies to callers with the run's key only (``/health`` is open, as llama.cpp's).

Logs ``start <pid>`` and one ``call <pid>`` line per completion with the right key to the log
file its command line names; ``fail`` there answers every completion with a 500. (Its settings
come on the command line: a server's environment holds no variable of a test's.)

    server.py READY_FD LOG_FILE [fail]
"""

from __future__ import annotations

import os
import sys

from memprobe.serving.local_server import KEY_CHILD_ENV
from memprobe.testing.fake_endpoint import Faults, make_server

LOG = sys.argv[2]
KEY = os.environ[KEY_CHILD_ENV]


def note(line: str) -> None:
    with open(LOG, "a", encoding="utf-8") as fh:
        fh.write(f"{line} {os.getpid()}\n")


def main() -> None:
    fail = sys.argv[3:] == ["fail"]
    server = make_server("127.0.0.1", 0, faults=Faults({"server_error": 1.0}) if fail else None)
    base = server.RequestHandlerClass

    class Keyed(base):  # type: ignore[misc, valid-type]
        def _refused(self) -> bool:
            if self.headers.get("Authorization") == f"Bearer {KEY}":
                return False
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._send(401, {"error": {"message": "wrong key"}})
            return True

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/health") or not self._refused():
                super().do_GET()

        def do_POST(self) -> None:
            if not self._refused():
                note("call")
                super().do_POST()

    server.RequestHandlerClass = Keyed
    fd = int(sys.argv[1])
    os.write(fd, f"http://127.0.0.1:{server.server_address[1]}\n".encode())
    os.close(fd)
    note("start")
    server.serve_forever()


if __name__ == "__main__":
    main()
