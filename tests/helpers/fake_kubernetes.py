"""A stand-in Kubernetes API server: records what snakemake-executor-plugin-kubernetes submits.

It answers the few calls the plugin makes (create/delete a Secret and Jobs, read a Job's status,
list its pods) over plain HTTP, writes every created object to ``objects.jsonl`` and keeps each
job "active" forever, so a run submits its first ready jobs and waits. ``kubeconfig`` writes the
config file that points the plugin's client here.
Run: ``python tests/helpers/fake_kubernetes.py DIR`` (prints the port).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_LOCK = threading.Lock()


def kubeconfig(path: Path, port: int) -> None:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "fake", "user": {"token": "fake"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "current-context": "fake",
    }
    path.write_text(json.dumps(cfg))


def handler(out: Path) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet
            pass

        def _reply(self, body: dict, code: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with _LOCK, open(out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"path": self.path, "body": body}) + "\n")
            self._reply(body, 201)

        def do_GET(self) -> None:
            if re.search(r"/jobs/[^/]+(/status)?$", self.path):
                name = self.path.split("/jobs/")[1].split("/")[0]
                self._reply({"metadata": {"name": name}, "status": {"active": 1}})
            else:  # pod lists
                self._reply({"kind": "PodList", "items": []})

        def do_DELETE(self) -> None:
            self._reply({"kind": "Status", "status": "Success"})

    return Handler


def serve(folder: Path) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler(folder / "objects.jsonl"))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig(folder / "kubeconfig", server.server_address[1])
    return server


def submitted(folder: Path) -> list[dict]:
    path = folder / "objects.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


if __name__ == "__main__":
    srv = serve(Path(sys.argv[1]))
    print(srv.server_address[1], flush=True)
    threading.Event().wait()
