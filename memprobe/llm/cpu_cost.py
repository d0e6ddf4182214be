"""CPU accounting of one job, for the benchmark (``benchmarks/run_bench.py``).

Off unless ``MEMPROBE_JOB_STATS`` names a directory. Then, at exit, the job writes one JSON
file there: its process CPU time (``getrusage``), the CPU it had spent when its first LLM
client was built (start-up: interpreter, imports, config, inputs), and per kind of call (paid,
replayed from the cache) the count and the CPU its calling thread spent in them
(``time.thread_time``: waiting on the endpoint or on another job's lock costs nothing).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec

P = ParamSpec("P")
ENV = "MEMPROBE_JOB_STATS"
_DIR = os.environ.get(ENV)
_lock = threading.Lock()
_stats: dict[str, float] = {}
_startup: list[float] = []


def enabled() -> bool:
    return bool(_DIR)


def client_built() -> None:
    """Mark the end of start-up: the first LLM client of the job."""
    if _DIR and not _startup:
        _startup.append(time.process_time())


def counted(call: Callable[P, tuple[str, str]]) -> Callable[P, str]:
    """Wrap an LLM call that returns (content, kind): count it and its thread's CPU by kind
    (``paid``, ``replayed``; ``failed`` when it raises); return the content."""

    @functools.wraps(call)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> str:
        if not _DIR:
            return call(*args, **kwargs)[0]
        cpu, kind = time.thread_time(), "failed"
        try:
            content, kind = call(*args, **kwargs)
            return content
        finally:
            add_call(kind, time.thread_time() - cpu)

    return wrapper


def add_call(kind: str, cpu_s: float) -> None:
    with _lock:
        _stats[kind] = _stats.get(kind, 0) + 1
        _stats[f"{kind}_cpu_s"] = _stats.get(f"{kind}_cpu_s", 0.0) + cpu_s


def _write() -> None:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    argv = sys.argv
    # A shell job's command line is RULE LOG USAGE JOB_JSON (memprobe/workflow/shell_job.py).
    # A `script:` job runs a temporary copy named like tmpXXXX.<script>.py.
    rule, log = (argv[1], argv[2]) if len(argv) == 5 else (Path(argv[0]).stem.split(".")[-1], "")
    record = {
        "rule": rule,
        "log": log,
        "cpu_s": ru.ru_utime + ru.ru_stime,
        "startup_cpu_s": _startup[0] if _startup else ru.ru_utime + ru.ru_stime,
        "llm": bool(_startup),
        **_stats,
    }
    out = Path(str(_DIR)) / f"{rule}-{os.getpid()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record))


if _DIR:
    atexit.register(_write)
