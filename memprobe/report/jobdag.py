"""The file-level job DAG of a finished run, and its critical path weighted by LLM time.

``snakemake --detailed-summary TARGET`` lists every output with its rule, log and input files;
that is enough to rebuild the job DAG (a job = its rule and its log file) without Snakemake's
internals. Used by the benchmark harness (critical-path bound, rerun precision) and the tests.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path


def job_counts(output: str) -> dict[str, int]:
    """Jobs per rule from the "Job stats:" table Snakemake prints (a dry run's plan)."""
    lines = output.splitlines()
    counts: dict[str, int] = {}
    if "Job stats:" not in lines:
        return counts
    for line in lines[lines.index("Job stats:") + 3 :]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        if parts[0] != "total":
            counts[parts[0]] = int(parts[1])
    return counts


class Dag:
    """Jobs of a finished run from ``--detailed-summary``: id = (rule, log file)."""

    def __init__(self, text: str) -> None:
        self.rule: dict[str, str] = {}
        self.inputs: dict[str, set[str]] = defaultdict(set)
        producer: dict[str, str] = {}
        for line in text.splitlines()[1:]:
            cols = line.split("\t")
            if len(cols) < 5 or cols[2] in ("", "-"):
                continue
            out, rule, logf, ins = cols[0], cols[2], cols[3], cols[4]
            job = f"{rule}|{logf}"
            self.rule[job] = rule
            producer[out] = job
            self.inputs[job] |= {i for i in ins.split(",") if i and i != "-"}
        self.parents = {
            j: {producer[i] for i in ins if i in producer} - {j} for j, ins in self.inputs.items()
        }
        self.children: dict[str, set[str]] = defaultdict(set)
        for j, ps in self.parents.items():
            for p in ps:
                self.children[p].add(j)

    def order(self) -> list[str]:
        seen: set[str] = set()
        out: list[str] = []

        def visit(j: str) -> None:
            if j in seen:
                return
            seen.add(j)
            for p in self.parents.get(j, ()):
                visit(p)
            out.append(j)

        for j in self.rule:
            visit(j)
        return out

    def dependents(self, path: str) -> Counter:
        """Jobs per rule that declare ``path`` as an input, plus everything downstream."""
        return self.downstream(j for j, ins in self.inputs.items() if path in ins)

    def downstream(self, jobs) -> Counter:
        """Jobs per rule among ``jobs`` and everything downstream of them."""
        todo = list(jobs)
        hit: set[str] = set()
        while todo:
            j = todo.pop()
            if j not in hit:
                hit.add(j)
                todo += self.children.get(j, ())
        return Counter(self.rule[j] for j in hit)


def job_key(job: str) -> tuple[str, str, str, str]:
    """(rule, system, user, rest) from a job's log path, matching the ledger's job tag."""
    rule, _, logs = job.partition("|")
    logf = logs.split(",")[0]  # the job's log; the next is its usage ledger
    # logs/<run>/<rule>/<wildcards>.log (docs/runs.md): the wildcards follow the rule's folder
    parts = Path(logf).with_suffix("").parts
    parts = parts[parts.index(rule) + 1 :] if rule in parts else parts[2:]
    flat = "_".join(parts)
    m = re.search(r"(user_\d{3,})", flat)
    user = m.group(1) if m else ""
    system = flat.split(f"_{user}")[0] if user and not flat.startswith(user) else ""
    rest = flat.split(user, 1)[1].lstrip("_") if user else ""
    return rule, system, user, re.sub(r"^k(\d+)$", r"\1", rest)


def busy_time(rows: list[dict]) -> float:
    """Seconds during which at least one of these calls was in flight: paid calls, and
    replays that waited for a parallel job's identical call (their latency is the wait)."""
    spans = sorted(
        (float(r["ts"]) - float(r["latency_s"]), float(r["ts"]))
        for r in rows
        if float(r["latency_s"]) > 0
    )
    total, cur_s = 0.0, 0.0
    cur_e: float | None = None
    for s, e in spans:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def critical_path(dag: Dag, ledger: list[dict]) -> tuple[float, list[tuple[str, float]]]:
    by_job: dict[tuple, list[dict]] = defaultdict(list)
    for r in ledger:
        by_job[(r["rule"], r["system"], r["user"], r["mode"])].append(r)
    weight = {j: busy_time(by_job.get(job_key(j), [])) for j in dag.rule}
    best: dict[str, float] = {}
    via: dict[str, str | None] = {}
    for j in dag.order():
        ps = dag.parents.get(j, set())
        p = max(ps, key=lambda x: best[x], default=None)
        best[j] = weight[j] + (best[p] if p else 0.0)
        via[j] = p
    end = max(best, key=best.__getitem__)
    chain = []
    node: str | None = end
    while node:
        chain.append((node, weight[node]))
        node = via[node]
    return best[end], chain[::-1]
