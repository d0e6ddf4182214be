"""A loopback test server run two ways: on a daemon thread (tests) or in the foreground (CLI)."""

from __future__ import annotations

import threading
from http.server import ThreadingHTTPServer


class Background:
    """``server`` on a daemon thread: ``.base_url``, ``.close()``."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def serve_until_interrupted(server: ThreadingHTTPServer, name: str) -> None:
    """Print where ``server`` listens, then serve until Ctrl-C."""
    host, port = server.server_address[:2]
    print(f"{name} on http://{host!s}:{port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
