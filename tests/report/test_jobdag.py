"""The job DAG of a finished run rebuilt from ``--detailed-summary`` text, and its critical
path weighted by LLM time (memprobe/report/jobdag.py), on hand-written Snakemake output."""

from __future__ import annotations

from collections import Counter

import pytest

from memprobe.report.jobdag import Dag, busy_time, critical_path, job_counts, job_key

DRY_RUN = """Building DAG of jobs...
Job stats:
job        count
-------  -------
all            1
persona        3
total          4

Reasons:
"""

HEADER = "output_file\tdate\trule\tlog-file(s)\tinput-file(s)\tshellcmd\tstatus\tplan"


def row(out: str, rule: str, log: str, inputs: str) -> str:
    return "\t".join([out, "Thu Dec  3 10:00:00 2026", rule, log, inputs, "-", "ok", "no update"])


SUMMARY = "\n".join(
    [
        HEADER,
        row("config.yaml", "-", "-", "-"),  # a source file: no job
        row("persona/user_001.json", "persona", "logs/persona/user_001.log", "config.yaml"),
        row("bank/user_001.json", "bank", "logs/bank/user_001.log", "persona/user_001.json"),
        row(
            "rollout/mem0/user_001.json",
            "rollout",
            "logs/rollout/mem0/user_001.log,logs/usage/rollout/mem0/user_001.csv",
            "bank/user_001.json,persona/user_001.json",
        ),
        row("judge/user_001.json", "judge", "logs/judge/user_001.log", "persona/user_001.json"),
        row(
            "tables/t.csv",
            "tables",
            "logs/tables.log",
            "rollout/mem0/user_001.json,judge/user_001.json",
        ),
    ]
)

PERSONA, BANK = "persona|logs/persona/user_001.log", "bank|logs/bank/user_001.log"
ROLLOUT = "rollout|logs/rollout/mem0/user_001.log,logs/usage/rollout/mem0/user_001.csv"
JUDGE, TABLES = "judge|logs/judge/user_001.log", "tables|logs/tables.log"


def test_job_counts_read_the_job_stats_table_without_the_total():
    assert job_counts(DRY_RUN) == {"all": 1, "persona": 3}
    assert job_counts("Nothing to be done.") == {}


def test_the_dag_links_each_job_to_the_jobs_that_made_its_inputs():
    dag = Dag(SUMMARY)
    assert set(dag.rule) == {PERSONA, BANK, ROLLOUT, JUDGE, TABLES}
    assert dag.parents[PERSONA] == set()  # config.yaml is made by no job
    assert dag.parents[ROLLOUT] == {BANK, PERSONA}
    assert dag.children[PERSONA] == {BANK, ROLLOUT, JUDGE}
    order = dag.order()
    assert sorted(order) == sorted(dag.rule)
    assert all(order.index(p) < order.index(j) for j in order for p in dag.parents[j])


def test_dependents_count_every_job_downstream_of_a_file_by_rule():
    dag = Dag(SUMMARY)
    assert dag.dependents("bank/user_001.json") == Counter(rollout=1, tables=1)
    assert dag.dependents("persona/user_001.json") == Counter(bank=1, rollout=1, judge=1, tables=1)
    assert dag.dependents("nobody/reads.this") == Counter()


@pytest.mark.parametrize(
    ("job", "key"),
    [
        (
            "attribution|logs/attribution/mem0/user_001/retrieve.log",
            ("attribution", "mem0", "user_001", "retrieve"),
        ),
        (
            "import_retrieved|logs/import_retrieved/mem0/user_012_k5.log",
            ("import_retrieved", "mem0", "user_012", "5"),
        ),
        ("persona|logs/persona/user_001.log", ("persona", "", "user_001", "")),
        # a run's folder (docs/runs.md), and the shared users' folder of a users rule
        (
            "rollout|logs/smoke/rollout/longctx_full/user_002.log,results/smoke/usage/x.csv",
            ("rollout", "longctx_full", "user_002", ""),
        ),
        (
            "judge|logs/judge/nomem/user_001/dump_all.log",
            ("judge", "nomem", "user_001", "dump_all"),
        ),
        ("bank|logs/users/bank-0a1b2c/bank/user_003.log", ("bank", "", "user_003", "")),
        (TABLES, ("tables", "", "", "")),
        (ROLLOUT, ("rollout", "mem0", "user_001", "")),  # the log, not the usage ledger
    ],
)
def test_a_jobs_key_is_read_from_its_log_path(job, key):
    assert job_key(job) == key


def call(rule: str, ts: float, latency: float, system: str = "", user: str = "user_001") -> dict:
    return {
        "rule": rule, "system": system, "user": user, "mode": "",
        "ts": str(ts), "latency_s": str(latency),
    }  # fmt: skip


def test_busy_time_merges_overlapping_calls_and_skips_cache_hits():
    rows = [
        call("r", 10, 5),
        call("r", 12, 4),
        call("r", 11, 2),
        call("r", 30, 2),
        call("r", 40, 0),
    ]
    # 5..12 (9..11 inside it) and 28..30; the cache hit took no time
    assert busy_time(rows) == pytest.approx(7 + 2)
    assert busy_time([]) == 0.0


def test_the_critical_path_is_the_heaviest_chain_of_llm_time():
    ledger = [
        call("persona", 2, 2),
        call("bank", 10, 3),
        call("rollout", 20, 5, system="mem0"),
        call("rollout", 22, 4, system="mem0"),  # overlaps the first: 7 s busy in all
        call("judge", 30, 4),
        call("tables", 40, 1, user=""),  # a job of no user
    ]
    total, chain = critical_path(Dag(SUMMARY), ledger)
    assert total == pytest.approx(2 + 3 + 7 + 1)  # not through judge's 4 s (2 + 4 + 1)
    assert chain == [(PERSONA, 2.0), (BANK, 3.0), (ROLLOUT, 7.0), (TABLES, 1.0)]
