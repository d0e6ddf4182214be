"""The usage ledger: one CSV row per LLM call, one file per job under ``results/usage/``.

The paper's Table 5 token counts are not auditable; ours are rebuilt from these rows.
"""

from __future__ import annotations

import csv
import io
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

COLUMNS = (
    "ts",
    "job",
    "role",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "cached",
    "reask",
    # sha256 of the request (no secret in it): "no finished call paid twice" is checkable as
    # "no key with two rows cached=false, status=ok".
    "key",
    # ok: the reply handed to the caller (json() may still re-ask with feedback: reask > 0).
    # Paid for and asked again at once: invalid (off schema, re-sampled unchanged), empty (no
    # content), cut (structured, finish_reason length: asked again with a higher max_tokens).
    "status",
    "finish_reason",  # the endpoint's: stop | length | ... ("" when it sent none)
)


class Ledger:
    def __init__(self, path: str | os.PathLike[str] | None, job: str = "") -> None:
        self.path = Path(path) if path else None
        self.job = job
        self._lock = threading.Lock()

    def record(
        self,
        *,
        role: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        latency_s: float,
        cached: bool,
        reask: int = 0,
        key: str = "",
        status: str = "ok",
        finish_reason: str = "",
    ) -> None:
        if self.path is None:
            return
        row = {
            "ts": f"{time.time():.3f}",
            "job": self.job,
            "role": role,
            "model": model,
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "latency_s": f"{latency_s:.4f}",
            "cached": "true" if cached else "false",
            "reask": reask,
            "key": key,
            "status": status,
            "finish_reason": finish_reason,
        }
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=COLUMNS)
        writer.writerow(row)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Append mode: rows of a killed-and-resumed job accumulate, so the ledger shows
            # which calls were paid and which were replayed from the cache. One write() per
            # row on an O_APPEND fd: a SIGKILL cannot leave half a row for the next to extend.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # umask applies
            try:
                data = buf.getvalue()
                if os.fstat(fd).st_size == 0:
                    head = io.StringIO()
                    csv.DictWriter(head, fieldnames=COLUMNS).writeheader()
                    data = head.getvalue() + data
                os.write(fd, data.encode("utf-8"))
            finally:
                os.close(fd)


# -- reading ----------------------------------------------------------------------------------
def run_files(results_dir: str | os.PathLike[str]) -> list[Path]:
    """Every job's ledger under a run's ``usage/`` (not the pending ``.partial``/``.last``)."""
    return sorted((Path(results_dir) / "usage").rglob("*.csv"))


def read_rows(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, str]]:
    """The rows of these ledgers, in order; a missing one (a job that called no LLM) has none."""
    rows: list[dict[str, str]] = []
    for path in map(Path, paths):
        if path.exists():
            with open(path, newline="", encoding="utf-8") as fh:
                rows += list(csv.DictReader(fh))
    return rows
