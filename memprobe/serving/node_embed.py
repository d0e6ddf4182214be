"""A cluster node's embedding server: one model for every job of the run on that node.

On the local executor the Snakefile's ``onstart`` starts one embedding server for the run
(memprobe/serving/embed_service.py). A cluster job runs on a node the submitting Snakemake
cannot start anything on, so under ``cluster_embedding.server: node`` onstart only names the
run (``MEMPROBE_EMBED_NODE``) and gives it a token; the first job on a node that encodes starts
the server there, detached, and the run's later jobs on that node send their texts to it. It
exits after ``idle_exit_s`` without a request, so nothing outlives the run for long. Where the
cluster kills what a job leaves behind (proctrack/cgroup), the server ends with the job that
started it and the next job starts another: slower, never wrong (same model, same thread
count, the same vectors as a model loaded in the job).

The socket lives in ``/tmp/memprobe-embed-<uid>``, a folder of this user's alone (0700, checked
for owner, as the rate limiter's node folder): no other user can bind the address or connect.
Starting is under a file lock there, so jobs starting at once start one server.
"""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import sys
from pathlib import Path

from memprobe.serving import served_process

NODE_ENV = "MEMPROBE_EMBED_NODE"  # the run's name for its node servers (not a secret)
IDLE_ENV = "MEMPROBE_EMBED_IDLE_S"  # seconds without a request before a node server exits
IDLE_S_DEFAULT = 120.0
TOKEN_IN_ENV = "_MEMPROBE_EMBED_TOKEN_IN"  # how the server gets its token (never argv)
NODE_DIR = "/tmp/memprobe-embed-{uid}"  # on the node's own disk, one folder per user


class NodeDirError(RuntimeError):
    """The node folder is not this user's alone."""


def node_dir() -> Path:
    """``/tmp/memprobe-embed-<uid>``, made 0700 if missing; raises :class:`NodeDirError` where
    it is another user's or others may enter it."""
    path = Path(NODE_DIR.format(uid=os.getuid()))
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise NodeDirError(f"{path}: not a folder of this user's")
    if info.st_mode & 0o077:
        raise NodeDirError(f"{path}: others may enter it (mode {info.st_mode & 0o777:o})")
    return path


def socket_path(run: str) -> str:
    return str(node_dir() / f"{run}.sock")


def lock_path(run: str) -> Path:
    return node_dir() / f"{run}.lock"


def listening(sock: str) -> bool:
    # A server busy encoding still answers /health on a thread of its own; the wait is long
    # enough for a loaded node, since a live server taken for dead would be started twice.
    return served_process.status("http://localhost/health", uds=sock, timeout_s=10.0) == 200


def ensure(run: str, token: str, idle_s: float, timeout_s: float = 30.0) -> str:
    """The socket of the run's server on this node, started here if none answers (under the
    node's lock, so only one job starts it). Returns once it listens; the model loads in the
    background, and an encode waits for it there."""
    sock = socket_path(run)
    with open(lock_path(run), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if listening(sock):
            return sock
        Path(sock).unlink(missing_ok=True)  # a server that stopped (or was killed) left it
        log = node_dir() / f"{run}.log"
        cmd = [sys.executable, "-m", "memprobe.serving.embed_service", "--socket", sock]
        cmd += ["--idle-exit-s", str(idle_s), "--lock", str(lock_path(run))]
        with open(log, "a") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                env=served_process.child_env(**{TOKEN_IN_ENV: token}),
                start_new_session=True,  # not this job's: it serves the node's later jobs
                close_fds=True,
            )
        try:  # /health answers once it listens, before the model has loaded
            served_process.wait_healthy(proc, "http://localhost", timeout_s, 0.05, uds=sock)
        except served_process.NotHealthy as err:
            if err.exit_code is not None:
                raise OSError(
                    f"node embedding server exited with {err.exit_code} (see {log})"
                ) from None
            proc.kill()
            raise OSError(f"node embedding server did not listen within {timeout_s:.0f}s") from None
        return sock


def idle_s_from_env() -> float:
    given = os.environ.get(IDLE_ENV)
    return float(given) if given else IDLE_S_DEFAULT
