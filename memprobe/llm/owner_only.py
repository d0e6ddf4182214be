"""Lock and state files only this user can open: 0600 files in 0700 folders, checked for
owner, and locks whose every wait ends by a deadline.

``flock`` needs only read access to its file, so a lock file another local user can open is one
they can hold, for as long as they like, and every call of the run waits behind it; a state file
(a rate limiter's pace, a job's attempt) they can write is one they can plant. So a run's lock
and state folders are created 0700 (an existing one of ours is tightened; one that is a link or
another user's stops the job in one line naming the config key to change), their files are
opened 0600 without following a link and checked for owner, and a lock is given up once the
call's deadline (``llm.timeout_s``) has passed: the caller then goes on without it (a lock here
saves work, never guards correctness), so even a stuck process of the same user cannot hold a
call for longer.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
from pathlib import Path
from types import TracebackType

from memprobe.config.base import ConfigError


class NotPrivate(ConfigError):
    """A run's lock or state folder (or file) that another user owns, or a link: one line
    naming the config key that places it."""


class LockTimeout(TimeoutError):
    """A lock still held by another process when the call's deadline came."""


def private_dir(path: str | os.PathLike[str], key: str) -> Path:
    """``path`` as a folder only this user can enter: created 0700, an existing one of ours
    tightened to 0700; a link or another user's is :class:`NotPrivate`."""
    path = Path(path)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
    except FileExistsError:
        raise NotPrivate(f"{key}: {path} is a file, not a folder") from None
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise NotPrivate(
            f"{key}: {path} is a link or not a folder: the run keeps its locks and state only "
            "in a folder of its own (remove it, or set the key to another folder)"
        )
    if st.st_uid != os.getuid():
        raise NotPrivate(
            f"{key}: {path} belongs to uid {st.st_uid}, not to this user: another user could "
            "hold or plant the run's locks and state there (remove it, or set the key to "
            "another folder)"
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path


def open_private(path: str | os.PathLike[str], key: str, flags: int = os.O_RDWR) -> int:
    """A descriptor of ``path`` (opened to write: created 0600 when missing), never through a
    link; a file another user owns is :class:`NotPrivate`, a looser one of ours is tightened
    to 0600."""
    create = os.O_CREAT if flags & (os.O_WRONLY | os.O_RDWR) else 0
    try:
        fd = os.open(path, flags | create | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise
        raise NotPrivate(f"{key}: {path} is a link (remove it)") from None
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid():
            raise NotPrivate(
                f"{key}: {path} belongs to uid {st.st_uid}, not to this user (remove it)"
            )
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def flock_within(fd: int, wait_s: float) -> bool:
    """Take an exclusive ``flock`` on ``fd``, waiting at most ``wait_s``: False when another
    holder kept it that long. A filesystem without ``flock`` (some network mounts) counts as
    taken: nothing to wait for."""
    deadline = time.monotonic() + max(0.0, wait_s)
    pause = 0.01
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(pause, left))
            pause = min(pause * 2, 0.2)
        except OSError:
            return True


class OwnerLock:
    """An exclusive lock on a file only this user can open, whose waits end by ``timeout_s``.

    Re-entrant per thread, and each thread takes the OS lock on its own descriptor, so a job's
    threads exclude each other as its processes do. ``acquire`` has the ``threading.Lock``
    signature (pyrate-limiter's buckets take it as their lock); ``with`` raises
    :class:`LockTimeout` when the wait ran out."""

    def __init__(self, path: str | os.PathLike[str], timeout_s: float, key: str) -> None:
        self.path = Path(path)
        self.timeout_s = timeout_s
        self.key = key
        self._held = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        count = getattr(self._held, "count", 0)
        if count:
            self._held.count = count + 1
            return True
        fd = open_private(self.path, self.key)
        wait = 0.0 if not blocking else self.timeout_s if timeout < 0 else timeout
        if not flock_within(fd, min(wait, self.timeout_s)):
            os.close(fd)
            return False
        self._held.fd, self._held.count = fd, 1
        return True

    def release(self) -> None:
        self._held.count -= 1
        if self._held.count == 0:
            os.close(self._held.fd)  # closing drops the flock

    def __enter__(self) -> OwnerLock:
        if not self.acquire():
            raise LockTimeout(f"{self.path}: held by another process for {self.timeout_s:g}s")
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
