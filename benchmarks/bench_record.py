"""A benchmark's figures as data: one JSON file per run in ``benchmarks/results/<name>.json``.

Every record has the fields of ``FIELDS`` (None where a run has no such figure: a SLURM run's
CPU, which its jobs spend on the cluster's nodes; a stopped run's bound), and may add its own
(the per-minute samples, the CPU by process kind). ``benchmarks/results_md.py`` makes
``benchmarks/RESULTS.md``'s generated section from these files.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "benchmarks" / "results"

# Every record's fields, in this order (results_md.py's table reads them).
FIELDS = (
    "name",
    "executor",  # local | slurm
    "users",
    "systems",
    "rpm",  # the provider's requests per minute (None: no limit)
    "wall_s",  # the run's wall time (a stopped run: until it was stopped)
    "bound_s",  # max(critical path, requests / RPM, tokens / TPM); None for a stopped run
    "window_s",  # the steady window's length (None: the figures are the whole run's)
    "admitted_per_min",  # requests the provider admitted a minute, over the window
    "share_429",  # of the requests it got, the share it answered 429, over the window
    "calls_lost",  # calls that got no reply after every retry (each fails its job)
    "cpu_ms_per_paid_call",  # the run's processes (the fake endpoint not), over the window
    "peak_rss_mib",  # the run's process tree, summed
    "commit",  # git HEAD, "-dirty" when tracked files differed from it
    "command",  # what reproduces it, from the repository root
)


def commit() -> str:
    """HEAD's hash, with ``-dirty`` where tracked files (but benchmarks/results/) differ."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()

    head = git("rev-parse", "--short=12", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!benchmarks/results")
    return f"{head}-dirty" if dirty else head


def command(script: str) -> str:
    """The command line that ran, quoted for a shell (a --note has spaces)."""
    return shlex.join(["python", f"benchmarks/{script}", *sys.argv[1:]])


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "load_average_at_end": round(os.getloadavg()[0], 1),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def write(record: dict[str, Any], directory: Path = RESULTS_DIR) -> Path:
    """``record`` as ``<directory>/<name>.json``: the FIELDS first (absent ones as None)."""
    out = {key: record.get(key) for key in FIELDS}
    out.update({k: v for k, v in record.items() if k not in out})
    path = Path(directory) / f"{record['name']}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(out, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path
