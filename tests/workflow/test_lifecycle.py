"""The run's start and end (memprobe/workflow/lifecycle.py): only what the scheduled jobs use
starts, every problem before the first job is one line, and the end stops what the start
started and says which replies were stand-ins."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from memprobe.config.loading import load_config
from memprobe.serving import embed_service
from memprobe.spec import stand_in_log
from memprobe.spec.records import StandIn
from memprobe.workflow import lifecycle, paths
from tests.helpers.workflow import tiny_config

FILES = lifecycle.JudgeFiles("a.yaml", "p.md", "pool.yaml", "cal.csv", "deg.csv", "cross.csv")


def fake_workflow(jobs=()):
    def job(rule, **wildcards):
        return SimpleNamespace(
            rule=SimpleNamespace(name=rule),
            wildcards=SimpleNamespace(items=lambda: wildcards.items()),
        )

    class Dag(list):
        jobs = property(list)

        def needrun_jobs(self):
            return list(self)

    return SimpleNamespace(
        dag=Dag(job(rule, **w) for rule, w in jobs),
        local_exec=True,
        global_resources={},
        config_settings=SimpleNamespace(config={}, config_args=None),
        envvars=set(),
        executor_plugin=None,
        scheduler=None,
    )


def run_of(tmp_path, **over):
    raw = tiny_config("http://127.0.0.1:9/v1", results_dir=str(tmp_path / "results"), **over)
    raw["progress"] = {"interval_s": 0}
    cfg = load_config(raw)
    return lifecycle.Run(cfg, paths.of(cfg), [])


def test_a_run_that_schedules_no_llm_job_checks_no_endpoint(tmp_path, capsys):
    run = run_of(tmp_path)  # port 9: nothing answers there
    run.start(fake_workflow([("tables", {})]), {}, FILES)
    run.end(fake_workflow(), ledgers=[])
    assert not run.embed_server and not run.progress


def test_a_run_that_calls_an_endpoint_stops_before_its_first_job_in_one_line(tmp_path):
    run = run_of(tmp_path)
    jobs = [("judge", {"system": "nomem", "user": "user_001", "mode": "dump_all"})]
    with pytest.raises(SystemExit) as stop:
        run.start(fake_workflow(jobs), {}, FILES)
    assert str(stop.value).startswith("memprobe: llm.base_url: endpoint http://127.0.0.1:9/v1")


def test_the_last_lines_name_the_stand_ins_of_the_run_s_jobs(tmp_path, capsys):
    ledger = tmp_path / "usage" / "judge" / "nomem_user_001_dump_all.csv"
    record = stand_in_log.JobStandIns(
        job="judge/nomem_user_001_dump_all",
        rule="judge",
        wildcards={"system": "nomem", "user": "user_001", "mode": "dump_all"},
        attempt=0,
        recoveries=[StandIn(stage="judge", where="w", problem="p", action="score 0.0")],
    )
    stand_in_log.write(stand_in_log.path_for(ledger), record)
    no_dag = SimpleNamespace()  # a dry or aborted run: the default target's ledgers
    lines = lifecycle.stand_in_lines(no_dag, [str(ledger)])
    assert lines and "judge" in lines[0]
    run_of(tmp_path).end(no_dag, [str(ledger)])
    assert capsys.readouterr().err.strip().splitlines() == lines


def test_the_end_stops_the_servers_even_when_the_progress_summary_fails(
    tmp_path, monkeypatch, capsys
):
    """Issue 42: the servers' stop calls came after the progress line's summary, so a summary
    that raised left the run's servers (and their keys) running."""
    stopped = []

    class Backend:
        def stop(self, cfg):
            stopped.append("backend")

    class Summary:
        def stop(self):
            stopped.append("progress")
            raise ValueError("a ledger row the summary could not read")

    monkeypatch.setattr(lifecycle, "backend", lambda name: Backend())
    monkeypatch.setattr(embed_service, "stop_for_run", lambda: stopped.append("embed"))
    run = run_of(tmp_path)
    run.embed_server = True
    run.progress.append(Summary())
    run.end(SimpleNamespace(), ledgers=[])
    assert stopped == ["backend", "embed", "progress"]
    assert "memprobe: no progress summary (ValueError: a ledger row" in capsys.readouterr().err


@pytest.mark.parametrize("server", ["node", "job"])
def test_on_a_cluster_the_run_names_its_node_servers_and_starts_none(tmp_path, monkeypatch, server):
    from memprobe.serving import embed_client, node_embed

    for name in (node_embed.NODE_ENV, embed_client.TOKEN_ENV, node_embed.IDLE_ENV):
        monkeypatch.setenv(name, "")  # so that what the run sets is undone after the test
        monkeypatch.delenv(name)
    monkeypatch.setattr(embed_service, "start_for_run", pytest.fail)
    run = run_of(tmp_path, cluster_embedding={"server": server, "idle_exit_s": 45})
    run.start_embedding(local=False)
    assert not run.embed_server
    named = {n: os.environ.get(n) for n in (node_embed.NODE_ENV, node_embed.IDLE_ENV)}
    if server == "job":  # each job loads the model itself
        assert named == dict.fromkeys(named) and not embed_client.configured()
    else:
        assert named[node_embed.IDLE_ENV] == "45.0" and embed_client.configured()
