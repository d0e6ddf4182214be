"""Content-addressed on-disk cache of LLM responses.

One file per request under ``<dir>/<key[:2]>/<key>.json``, written by atomic rename, so
parallel jobs (``--cores 8``) never need a lock and a SIGKILL never leaves a torn entry: a
reader sees either no entry or a whole one. A kill mid-write leaves at most a ``.tmp-*`` file,
which no key ever names. A rerun of a finished job replays its calls from
here and pays nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from memprobe.records import write_atomic


def request_key(request: dict[str, Any]) -> str:
    """sha256 over the canonical JSON of everything that shapes the reply.

    The request must already exclude secrets: callers pass model identity, base_url,
    messages, sampling params, schema and sample index, never an API key.
    """
    blob = json.dumps(request, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        try:
            with open(path, encoding="utf-8") as fh:
                entry = json.load(fh)
        except FileNotFoundError:
            return None
        except (ValueError, OSError):
            # Impossible with atomic writes; a foreign/corrupt file is a miss, re-asked and
            # overwritten, never a crash.
            return None
        if not isinstance(entry, dict) or not isinstance(entry.get("content"), str):
            return None
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        write_atomic(self._path(key), json.dumps(entry, ensure_ascii=False))
