"""The run's progress line, from the usage ledgers as they grow.

While a run goes, the Snakemake process prints one line every ``progress.interval_s``: jobs done
of total, calls paid (and replayed from the cache) and tokens so far, money at
``progress.prices``, and the time left at the current rate, next to ``memprobe estimate``'s
prediction for the same config (where the run goes to the tables); at the end the same line
once more as the run's summary (memprobe/workflow/lifecycle.py: onstart, onsuccess, onerror).
The figures are the ledgers' own: each poll reads only the bytes appended since the last one.
"""

from __future__ import annotations

import csv
import sys
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from memprobe.config.schema import Config, Price
from memprobe.llm import ledger


@dataclass
class Totals:
    """Sums over ledger rows: paid calls (``cached=false``, every status: all are billed)."""

    calls: int = 0
    replayed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    unpriced: set[str] = field(default_factory=set)  # models the price table lacks

    def add_row(self, row: dict[str, str], prices: dict[str, Price]) -> None:
        """Add one row; a malformed one (cut short, a count that is not a number: a torn
        write, a hand edit) is left out, never raised: the line must not stop the run's end."""
        if row.get("cached") == "true":
            self.replayed += 1
            return
        p, c = _count(row.get("prompt_tokens")), _count(row.get("completion_tokens"))
        if p is None or c is None or row.get("cached") != "false":
            return
        self.calls += 1
        self.prompt_tokens += p
        self.completion_tokens += c
        price = prices.get(row.get("model", ""))
        if price is None:
            self.unpriced.add(row.get("model", ""))
        else:
            self.usd += (p * price.input + c * price.output) / 1e6

    def __iadd__(self, other: Totals) -> Totals:
        self.calls += other.calls
        self.replayed += other.replayed
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.usd += other.usd
        self.unpriced |= other.unpriced
        return self


def _count(value: str | None) -> int | None:
    try:
        n = int(value or "")
    except ValueError:
        return None
    return n if n >= 0 else None


class LedgerTally:
    """Running sums over a run's ledgers (``<run>/usage/**.csv``, and its users' in the shared
    users' folders), read incrementally."""

    def __init__(
        self,
        results_dir: str | Path,
        prices: dict[str, Price],
        shared: Sequence[str | Path] = (),
        users: Collection[str] | None = None,
    ) -> None:
        self.results_dir = Path(results_dir)
        self.shared = shared
        self.users = users
        self.prices = prices
        self._files: dict[Path, tuple[int, Totals]] = {}  # bytes read, their sums

    def poll(self) -> Totals:
        # A running job's calls are in its `.partial` ledger until it ends (then its `.csv`).
        now = ledger.run_files(self.results_dir, self.shared, self.users, running=True)
        for gone in set(self._files) - set(now):
            del self._files[gone]
        for path in now:
            self._read_new(path)
        out = Totals()
        for _, sums in self._files.values():
            out += sums
        return out

    def _read_new(self, path: Path) -> None:
        offset, sums = self._files.get(path, (0, Totals()))
        try:
            size = path.stat().st_size
            if size < offset:  # replaced under us: count it afresh
                offset, sums = 0, Totals()
            if size == offset:
                return
            with open(path, "rb") as fh:
                fh.seek(offset)
                chunk = fh.read(size - offset)
        except FileNotFoundError:
            self._files.pop(path, None)
            return
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a row being written waits for the next poll
        text = whole.decode("utf-8", errors="replace")  # a garbled row is left out below
        if offset == 0:
            text = text.split("\n", 1)[1] if "\n" in text else ""  # the header
        for text_row in text.splitlines():  # the ledger's rows hold no newline
            try:
                values = next(csv.reader([text_row]), [])
            except csv.Error:
                continue  # a row the csv module cannot read is left out, as in add_row
            sums.add_row(dict(zip(ledger.COLUMNS, values, strict=False)), self.prices)
        self._files[path] = (offset + len(whole), sums)


@dataclass(frozen=True)
class Prediction:
    """``memprobe estimate``'s figures for the run: wall seconds and paid calls."""

    seconds: float
    calls: float


# The estimate describes the whole run, up to its tables: a run asked for less (the users'
# tasks.json alone, one rollout) has no prediction to stand beside.
WHOLE_RUN_RULE = "tables"


def predict(
    cfg: Config, llm_slots: int, shared: Sequence[str | Path] = (), rules: Collection[str] = ()
) -> Prediction | None:
    """The estimate for this config (an earlier run's rates where its ledger has them; ``shared``:
    the run's users' folders); None where the run's jobs (``rules``, their rule names) stop short
    of the tables."""
    from memprobe.report import estimate, estimate_calls, estimate_rates, estimate_time

    if WHOLE_RUN_RULE not in rules:
        return None

    results = Path(cfg.run_dir)
    rates = estimate_rates.observed(
        results, cfg, [Path(p) for p in shared]
    ) or estimate_rates.priors(cfg)
    latency = estimate_time.mean_latency(results) or estimate.assumed_latency(cfg)
    lines = estimate_calls.predict(cfg, rates)
    wall = estimate_time.wall_time(cfg, lines, latency, llm_slots)
    return Prediction(wall.seconds, wall.calls)


def clock(seconds: float) -> str:
    s = max(0, round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _m(tokens: int) -> str:
    return f"{tokens / 1e6:.2f}M"


def line(
    done: int,
    total: int,
    t: Totals,
    elapsed_s: float,
    prediction: Prediction | None,
    final: bool = False,
) -> str:
    """One progress line (``final``: the summary at the end)."""
    parts = [
        f"{done}/{total} jobs",
        f"{t.calls:,} calls paid ({t.replayed:,} replayed)",
        f"{_m(t.prompt_tokens + t.completion_tokens)} tokens "
        f"({_m(t.prompt_tokens)} in, {_m(t.completion_tokens)} out)",
        f"{t.usd:,.2f} USD"
        + (f" (no price for {', '.join(sorted(t.unpriced))})" if t.unpriced else ""),
        f"{clock(elapsed_s)} elapsed",
    ]
    if not final:
        left = time_left(done, total, t.calls, elapsed_s, prediction)
        parts.append(f"{clock(left)} left at the current rate" if left is not None else "")
    if prediction is not None:
        parts.append(
            f"estimate {clock(prediction.seconds)} and {prediction.calls:,.0f} calls in all"
        )
    head = "memprobe summary" if final else "memprobe progress"
    return f"{head}: " + ", ".join(p for p in parts if p)


def time_left(
    done: int, total: int, calls: int, elapsed_s: float, prediction: Prediction | None
) -> float | None:
    """By calls where the estimate says how many there will be, else by jobs."""
    if prediction is not None and calls > 0 and prediction.calls > calls:
        return (prediction.calls - calls) * elapsed_s / calls
    if done > 0:
        return (total - done) * elapsed_s / done
    return None


class Reporter:
    """Prints the line every ``interval_s`` on a daemon thread; ``stop`` prints the summary."""

    def __init__(
        self,
        cfg: Config,
        jobs: Callable[[], tuple[int, int]],
        prediction: Prediction | None,
        out: TextIO = sys.stderr,
        shared: Sequence[str | Path] = (),
    ) -> None:
        self.tally = LedgerTally(cfg.run_dir, cfg.progress.prices, shared, set(cfg.user_ids))
        self.interval_s = cfg.progress.interval_s
        self.jobs = jobs
        self.prediction = prediction
        self.out = out
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memprobe-progress", daemon=True)

    def start(self) -> Reporter:
        if self.interval_s > 0:
            self._thread.start()
        return self

    def current(self, final: bool = False) -> str:
        done, total = self.jobs()
        elapsed = time.monotonic() - self.started
        return line(done, total, self.tally.poll(), elapsed, self.prediction, final)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            print(self.current(), file=self.out, flush=True)

    def stop(self) -> str:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        summary = self.current(final=True)
        print(summary, file=self.out, flush=True)
        return summary
