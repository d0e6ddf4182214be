"""A job's attempt: how many times it failed on an LLM call, kept beside the response cache.

Every request is seeded, so a job that failed and is run again would send the same requests
and, for the calls that had failed, could meet the same dead end. A job that fails on an LLM
(``LLMError``: re-asks spent without a stand-in, an endpoint that stopped answering) bumps its
attempt; the next run of it then sends ``seed + ATTEMPT_STRIDE * attempt`` for the requests no
earlier attempt got a reply for, while everything an earlier attempt got is replayed from the
cache (memprobe/llm/client.py). A finished job's attempt stays put, so replaying it sends the
same requests and the cache answers all of them. Snakemake's ``--retries`` composes with this:
its retry of a failed job is the next attempt.

The counter is one small file per job under ``<llm.cache_dir>/attempts/`` (this user's alone:
0700, its files 0600, memprobe/llm/owner_only.py; another user could otherwise plant an attempt
that moves a job's samples), keyed by the job's
name, the run seed and its usage ledger's path (the job's own folder: its run's, or the shared
users' one, docs/runs.md, so one run's failure moves no other run's samples): it travels with
the cache that holds the replies it selects. A kill (SIGKILL, Ctrl-C) does not bump it: a
resume replays.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from memprobe.llm.owner_only import open_private, private_dir
from memprobe.spec.records import write_atomic


def _path(cache_dir: str, job: str, seed: int, ledger: str) -> Path:
    ident = json.dumps([job, seed, ledger])
    return Path(cache_dir) / "attempts" / f"{hashlib.sha256(ident.encode()).hexdigest()}.json"


def current(cache_dir: str, job: str, seed: int, ledger: str) -> int:
    """The attempt this run of the job is (0 until it has failed once)."""
    path = _path(cache_dir, job, seed, ledger)
    if not path.parent.is_dir():
        return 0
    private_dir(path.parent, "llm.cache_dir")
    try:
        fd = open_private(path, "llm.cache_dir", os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        with os.fdopen(fd, encoding="utf-8") as fh:
            return max(int(json.load(fh)["attempt"]), 0)
    except (ValueError, KeyError, TypeError):
        return 0  # a torn/foreign record: the first attempt


def bump(cache_dir: str, job: str, seed: int, ledger: str) -> int:
    """Record a failed attempt; returns the attempt the next run of the job will be."""
    nxt = current(cache_dir, job, seed, ledger) + 1
    path = _path(cache_dir, job, seed, ledger)
    private_dir(path.parent, "llm.cache_dir")
    write_atomic(path, {"job": job, "seed": seed, "ledger": ledger, "attempt": nxt}, private=True)
    return nxt
