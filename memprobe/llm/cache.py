"""Content-addressed on-disk cache of LLM responses.

One file per request under ``<dir>/<key[:2]>/<key>.json``, written by atomic rename, so a
SIGKILL never leaves a torn entry: a reader sees either no entry or a whole one. A kill
mid-write leaves at most a ``.tmp`` file, which no key ever names. A rerun of a finished job
replays its calls from here and pays nothing.

Entries are not fsynced (an fsync per paid call was a tenth of its CPU and more of its wall
time). That is safe: a killed process's writes are already the kernel's, so SIGKILL, OOM and
``snakemake`` dying lose nothing; only a power cut or kernel crash can, and then the rename
may be on disk before the data, leaving an empty or cut entry. ``get`` reads such an entry
as a miss (not JSON, or no string ``content``), so the call is asked again and the entry
overwritten: a lost entry costs one call, it never replays a wrong reply. The artifacts
(``records.write_atomic``) keep their fsync: they are results, not a cache.

Parallel jobs can send the identical request at the same moment (every system's first
simulator turn is the same prompt). ``inflight(key)`` is an advisory ``flock`` that the first
sender holds until its reply is cached, so the others wait and replay it instead of paying
again. The kernel drops the lock when its holder dies, so a killed job never blocks a resume.
The locks are this user's alone (``.locks-<uid>/``, 0700, files 0600: memprobe/llm/owner_only.py;
another user could otherwise hold every call of the run), and a wait for one ends at the call's
deadline: the call is then sent anyway (paid twice at worst, never held).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memprobe.llm.owner_only import NotPrivate, OwnerLock, private_dir
from memprobe.spec.records import write_all


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
        self._locks: Path | None = None  # this user's lock folder, made private on first use

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
        path = self._path(key)
        data = json.dumps(entry, ensure_ascii=False).encode("utf-8")
        # The temporary name is unique per process and thread; a leftover one (a kill between
        # the write and the rename) is named by no key and overwritten by the next attempt.
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # the umask applies
        try:
            try:
                write_all(fd, data)  # a short write (disk full) is finished or raised, never
            finally:  # renamed into place torn
                os.close(fd)
            os.replace(tmp, path)  # no fsync: see the module docstring
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def discard(self, key: str) -> None:
        """Drop an entry (the replies of a failed chain: a rerun must ask again)."""
        self._path(key).unlink(missing_ok=True)

    @contextlib.contextmanager
    def inflight(self, key: str, wait_s: float) -> Iterator[None]:
        """Hold the lock of ``key`` while asking for it (see the module docstring), waiting at
        most ``wait_s`` (the call's deadline) for another sender to let go.

        Locks are striped over 4096 files (``.locks-<uid>/<key[:3]>``) so they don't double the
        cache's file count; two different requests share a stripe with probability 1/4096.
        A cache that cannot hold a lock file (read-only, a filesystem without ``flock``)
        degrades to no de-duplication; a lock folder another user owns stops the call
        (:class:`~memprobe.llm.owner_only.NotPrivate`, one line).
        """
        try:
            if self._locks is None:
                self._locks = private_dir(self.root / f".locks-{os.getuid()}", "llm.cache_dir")
            lock = OwnerLock(self._locks / key[:3], wait_s, "llm.cache_dir")
            held = lock.acquire()
        except NotPrivate:
            raise
        except OSError:
            yield
            return
        try:
            yield  # held or not: past the deadline the call goes ahead (module docstring)
        finally:
            if held:
                lock.release()
