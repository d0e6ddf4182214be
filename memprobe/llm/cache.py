"""Content-addressed on-disk cache of LLM responses.

One file per request under ``<dir>/<key[:2]>/<key>.json``, written by atomic rename, so a
SIGKILL never leaves a torn entry: a reader sees either no entry or a whole one. A kill
mid-write leaves at most a ``.tmp-*`` file, which no key ever names. A rerun of a finished job
replays its calls from here and pays nothing.

Parallel jobs can send the identical request at the same moment (every system's first
simulator turn is the same prompt). ``inflight(key)`` is an advisory ``flock`` that the first
sender holds until its reply is cached, so the others wait and replay it instead of paying
again. The kernel drops the lock when its holder dies, so a killed job never blocks a resume.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memprobe.protocol.records import write_atomic


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

    def discard(self, key: str) -> None:
        """Drop an entry (the replies of a failed chain: a rerun must ask again)."""
        self._path(key).unlink(missing_ok=True)

    @contextlib.contextmanager
    def inflight(self, key: str) -> Iterator[None]:
        """Hold the lock of ``key`` while asking for it (see the module docstring).

        Locks are striped over 4096 files (``.locks/<key[:3]>``) so they don't double the
        cache's file count; two different requests share a stripe with probability 1/4096.
        A filesystem without ``flock`` (some network mounts) degrades to no de-duplication.
        """
        path = self.root / ".locks" / key[:3]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            yield
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                pass
            yield
        finally:
            os.close(fd)  # closing drops the lock
