"""Each LLM job's stand-ins, beside its usage ledger, for the run's last lines and the report.

A stand-in is what a stage used for a reply whose re-asks ran out (memprobe/llm/salvage.py).
The artifacts list theirs (``records.HasStandIns``, the field ``recoveries``); reading every
artifact at the end of a run would parse every transcript again, so each job also writes its
few to ``<results>/recoveries/<rule>/<wildcards>.json`` (the path of its usage ledger with
``usage`` for ``recoveries``: the field and folder keep their first name), and the attempt it
finished on. A job that needed none on its first attempt writes none.

A stage whose share of stand-ins passes ``llm.max_stand_in_share`` stops the run before its
tables (``check_share``, inspect_ai's ``fail_on_error`` as a share): an endpoint whose every
reply is invalid would otherwise yield a full set of tables made of stand-ins. The share is
counted over the calls of the stage's role (``vocabulary.STAGE_ROLE``) in the run's usage
ledgers of the rules it stood in for: one ``ok`` row with ``reask`` 0 per call, paid or
replayed.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field, ValidationError

from memprobe.config.base import ConfigError
from memprobe.spec.records import Record, RecordError, StandIn, first_error, write_atomic
from memprobe.vocabulary import STAGE_ROLE, STAGES, Stage


class JobStandIns(Record):
    job: str  # rule/wildcards, as the usage ledger names it
    rule: str
    wildcards: dict[str, str] = Field(default_factory=dict)
    attempt: int = 0  # the job's attempt (memprobe/workflow/attempts.py)
    recoveries: list[StandIn] = Field(default_factory=list)


def path_for(ledger: str | os.PathLike[str]) -> Path:
    """The recoveries file of the job whose usage ledger is ``ledger``."""
    p = Path(ledger)
    return p.parent.parent.parent / "recoveries" / p.parent.name / f"{p.stem}.json"


def write(path: Path, record: JobStandIns) -> None:
    if record.recoveries or record.attempt:
        write_atomic(path, record)
    else:
        path.unlink(missing_ok=True)


def read(paths: Iterable[str | os.PathLike[str]]) -> list[JobStandIns]:
    """The recoveries files that exist among ``paths`` (a job that recovered nothing has
    none)."""
    out = []
    for p in paths:
        try:
            text = Path(p).read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        try:
            out.append(JobStandIns.model_validate(json.loads(text)))
        except ValueError as err:
            why = first_error(err) if isinstance(err, ValidationError) else "not valid JSON"
            raise RecordError(f"{p}: {why}") from None
    return out


def per_stage(jobs: Iterable[JobStandIns]) -> Counter[str]:
    return Counter(r.stage for j in jobs for r in j.recoveries)


def stage_counts(counts: Counter[str]) -> str:
    """``bank 1, judge 2``: the count of each stage, in the protocol's order."""
    return ", ".join(f"{s} {counts[s]}" for s in STAGES if s in counts)


def listed_in(paths: Iterable[str | os.PathLike[str]]) -> str:
    """Where the recoveries files among ``paths`` that exist lie: their ``recoveries/`` folders
    (a shared users' folder keeps its own, outside the run's)."""
    folders = sorted({f"{Path(p).parent.parent}/" for p in paths if Path(p).exists()})
    return f"listed in {', '.join(folders)}" if folders else ""


class TooManyStandIns(ConfigError):
    """A stage whose share of stand-ins is past ``llm.max_stand_in_share``: one line."""


def shares(
    jobs: Iterable[JobStandIns], rows: Iterable[dict[str, str]]
) -> dict[Stage, tuple[int, int]]:
    """Each stage with stand-ins: (its stand-ins, its calls). Its calls are those of its role
    (``vocabulary.STAGE_ROLE``) in the ledger ``rows`` of the rules it stood in for (so the
    persona's and the bank's calls, both the generator's, are told apart by their jobs); never
    fewer than its stand-ins (a call whose row is missing still counts)."""
    calls = Counter(
        (r.get("job", "").split("/", 1)[0], r.get("role", ""))
        for r in rows
        if r.get("status") == "ok" and r.get("reask") == "0"
    )
    counts: Counter[Stage] = Counter()
    rules: dict[Stage, set[str]] = {}
    for job in jobs:
        for r in job.recoveries:
            counts[r.stage] += 1
            rules.setdefault(r.stage, set()).add(job.rule)
    return {
        s: (counts[s], max(sum(calls[rule, STAGE_ROLE[s]] for rule in rules[s]), counts[s]))
        for s in STAGES
        if counts[s]
    }


def check_share(
    jobs: list[JobStandIns], rows: Iterable[dict[str, str]], limit: float, listed: str
) -> None:
    """Stop (:class:`TooManyStandIns`) when a stage's share of stand-ins is past ``limit``;
    ``listed``: where the jobs' stand-in files lie (``listed_in``)."""
    over = [(s, n, calls) for s, (n, calls) in shares(jobs, rows).items() if n > limit * calls]
    if not over:
        return
    stages = "; ".join(f"{s} {n} of {calls} calls, {n / calls:.0%}" for s, n, calls in over)
    raise TooManyStandIns(
        f"llm.max_stand_in_share: more than {limit:g} of a stage's calls ended in a stand-in "
        f"({stages}): the endpoint's replies are mostly invalid, so no table is written "
        f"(nor recoveries.csv); each stand-in is {listed or 'listed in its artifact'}"
    )


def summary_lines(jobs: list[JobStandIns], where: str = "") -> list[str]:
    """The run's closing lines: stand-ins per stage, and jobs that needed a rerun."""
    counts = per_stage(jobs)
    total = sum(counts.values())
    lines = []
    if total:
        stages = stage_counts(counts)
        touched = sum(1 for j in jobs for r in j.recoveries if r.touches)
        lines.append(
            f"memprobe: {total} stand-in{'' if total == 1 else 's'} (re-asks spent, "
            f"a deterministic stand-in recorded in the artifact): {stages}"
            + (f"; {touched} touch a number and flag its cells" if touched else "")
            + (f" ({where})" if where else "")
        )
    else:
        lines.append("memprobe: no stand-ins (every reply validated)")
    reruns = [j for j in jobs if j.attempt]
    if reruns:
        names = ", ".join(f"{j.job} (attempt {j.attempt})" for j in reruns[:5])
        more = f" and {len(reruns) - 5} more" if len(reruns) > 5 else ""
        lines.append(f"memprobe: {len(reruns)} job(s) finished on a later attempt: {names}{more}")
    return lines
