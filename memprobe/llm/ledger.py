"""The usage ledger: one CSV row per LLM call, one file per job under
``results/<run>/usage/`` (a shared users' file's: beside that file, docs/runs.md).

The paper's Table 5 token counts are not auditable; ours are rebuilt from these rows.
"""

from __future__ import annotations

import csv
import io
import os
import threading
import time
from collections.abc import Collection, Iterable
from pathlib import Path

from memprobe.spec.records import write_all

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
    # content), cut (structured, finish_reason length: asked again with a higher max_tokens),
    # unfinished (finish_reason error or content_filter: no answer, never cached).
    "status",
    "finish_reason",  # the endpoint's: stop | length | ... ("" when it sent none)
)


def _file_id(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


_SHARED: dict[tuple[str, str], Ledger] = {}
_SHARED_LOCK = threading.Lock()


class Ledger:
    """Rows go to the file at once, written whole on an append-mode descriptor that
    stays open for the job: a SIGKILL right after a paid call finds its row in the kernel
    already (nothing paid is ever off the bill), and no row costs an open and a close (a stat
    checks the file is still the one opened).
    Buffering rows in the process instead would lose the last ones to a kill."""

    def __init__(self, path: str | os.PathLike[str] | None, job: str = "") -> None:
        self.path = Path(path) if path else None
        self.job = job
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._id = (0, 0)

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
        row = (
            f"{time.time():.3f}",
            self.job,
            role,
            model,
            prompt_tokens,
            completion_tokens,
            f"{latency_s:.4f}",
            "true" if cached else "false",
            reask,
            key,
            status,
            finish_reason,
        )
        buf = io.StringIO()
        csv.writer(buf).writerow(row)  # the columns in COLUMNS' order
        with self._lock:
            self._append(buf.getvalue().encode("utf-8"))

    def _append(self, data: bytes) -> None:
        """One whole row, or none: a row cut short (a full disk) is cut off again and the
        failure raised, so no torn row breaks Table 5's integer columns."""
        fd = self._open()
        end = os.fstat(fd).st_size  # this job alone appends to its ledger
        try:
            write_all(fd, data)
        except OSError as err:
            os.ftruncate(fd, end)
            raise OSError(err.errno, f"{self.path}: a ledger row was not written ({err})") from None

    def _open(self) -> int:
        """The job's descriptor of the ledger, opened (and headed, if new) on first use.

        Append mode: rows of a killed-and-resumed job accumulate, so the ledger shows which
        calls were paid and which were replayed from the cache. A row is one write() on an
        O_APPEND fd (a SIGKILL cannot leave half a row for the next to extend), finished if
        the kernel took only part of it, cut off again if it could not be finished.
        """
        if self._fd is not None and not self._still_ours():
            os.close(self._fd)  # the file was moved or deleted under us: start a new one
            self._fd = None
        if self._fd is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)  # umask applies
            if os.fstat(fd).st_size == 0:
                head = io.StringIO()
                csv.writer(head).writerow(COLUMNS)
                write_all(fd, head.getvalue().encode("utf-8"))
            self._fd = fd
            self._id = _file_id(os.fstat(fd))
        return self._fd

    def _still_ours(self) -> bool:
        try:
            return _file_id(os.stat(self.path)) == self._id  # type: ignore[arg-type]
        except FileNotFoundError:
            return False

    @classmethod
    def shared(cls, path: str | os.PathLike[str] | None, job: str = "") -> Ledger:
        """The process's one ledger of ``path`` (a job's roles share its descriptor, and no
        two of them can both find the file empty and write the header twice)."""
        if path is None:
            return cls(None, job)
        key = (str(Path(path).resolve()), job)
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = cls(path, job)
            return _SHARED[key]

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)  # type: ignore[arg-type]


# -- reading ----------------------------------------------------------------------------------
def run_files(
    results_dir: str | os.PathLike[str],
    shared: Iterable[str | os.PathLike[str]] = (),
    users: Collection[str] | None = None,
    running: bool = False,
) -> list[Path]:
    """Every job's ledger under a run's ``usage/`` (not the pending ``.partial``/``.last``,
    unless ``running``: then the ledgers of the jobs running now too), then under each
    ``shared`` users' folder (docs/runs.md) those of the run's ``users``: other runs with the
    same settings may have made more users there."""
    names = ("*.csv", "*.csv.partial") if running else ("*.csv",)

    def under(folder: str | os.PathLike[str]) -> list[Path]:
        return sorted(p for n in names for p in (Path(folder) / "usage").rglob(n))

    return under(results_dir) + [
        path
        for folder in shared
        for path in under(folder)
        if users is None or path.name.split(".")[0] in users
    ]


def read_rows(paths: Iterable[str | os.PathLike[str]]) -> list[dict[str, str]]:
    """The rows of these ledgers, in order; a missing one (a job that called no LLM) has none."""
    rows: list[dict[str, str]] = []
    for path in map(Path, paths):
        if path.exists():
            with open(path, newline="", encoding="utf-8") as fh:
                rows += list(csv.DictReader(fh))
    return rows


def write_rows(path: str | os.PathLike[str], rows: list[dict[str, str]]) -> None:
    """Replace a ledger with ``rows`` (a job's own pending ledger: no other process writes it)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    tmp = Path(path).with_name(Path(path).name + ".tmp")
    tmp.write_text(buf.getvalue(), encoding="utf-8")
    os.replace(tmp, path)
