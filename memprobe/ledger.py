"""The usage ledger: one CSV row per LLM call, one file per job under ``results/usage/``.

The paper's Table 5 token counts are not auditable; ours are rebuilt from these rows.
"""

from __future__ import annotations

import csv
import os
import threading
import time
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
        }
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists()
            # Append mode: rows of a killed-and-resumed job accumulate, so the ledger shows
            # which calls were paid and which were replayed from the cache.
            with open(self.path, "a", newline="", encoding="utf-8") as fh:
                writer = csv.DictWriter(fh, fieldnames=COLUMNS)
                if new:
                    writer.writeheader()
                writer.writerow(row)
                fh.flush()
