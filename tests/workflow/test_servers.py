"""Which servers a run starts: only those its scheduled jobs use (memprobe/workflow/servers.py)."""

from __future__ import annotations

from memprobe.config.loading import load_config
from memprobe.workflow import servers
from tests.helpers.workflow import local_raw, tiny_config

LOCAL = load_config(local_raw())  # backend local, nomem + longctx_full
REMOTE = load_config(tiny_config("http://127.0.0.1:9/v1"))
U = {"user": "user_001"}


def test_reading_finished_files_needs_no_server():
    jobs = [("inspector", {}), ("tables", {}), ("audit_agreement", {}), ("users", U)]
    need = servers.needs(LOCAL, jobs)
    assert not need.anything and not need.served_llm and not need.embeddings and not need.judging


def test_an_llm_job_needs_the_local_server_and_a_memory_system_the_embedder():
    judge = servers.needs(LOCAL, [("judge", {**U, "system": "nomem", "mode": "dump_all"})])
    assert judge.roles == {"judge"} and judge.served_llm and not judge.embeddings
    rollout = servers.needs(LOCAL, [("rollout", {**U, "system": "longctx_full"})])
    assert rollout.served_llm and rollout.embeddings and rollout.systems == {"longctx_full"}
    # nomem embeds nothing; an endpoint of our own is no local server
    assert not servers.needs(LOCAL, [("rollout", {**U, "system": "nomem"})]).embeddings
    remote = servers.needs(REMOTE, [("rollout", {**U, "system": "longctx_full"})])
    assert remote.anything and not remote.served_llm and remote.embeddings


def test_the_offline_judge_starts_no_llm_server_and_embeds():
    """judge.form: scorer (config/config.yaml's) grades with no LLM call: a judging job needs
    no llama.cpp server but the embedder, and is still a judging job (the calibration check)."""
    scorer = {**local_raw(), "judge": {"form": "scorer"}}
    judge = ("judge", {**U, "system": "nomem", "mode": "dump_all"})
    for job in (judge, ("judge_calibration", {})):
        need = servers.needs(load_config(scorer), [job])
        assert need.judging and need.embeddings, job
        assert not need.roles and not need.served_llm, job
    # an LLM judge with the offline one beside it (cross_check) needs both
    both = servers.needs(load_config({**scorer, "judge": {"cross_check": True}}), [judge])
    assert both.roles == {"judge"} and both.served_llm and both.embeddings


def test_a_system_that_encodes_in_its_own_jobs_needs_no_embedding_server():
    """memt with encode_in_job (or serve: true): its jobs encode on their own host."""
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    rollout = ("rollout", {**U, "system": "memt"})
    for memt, served in (({}, True), ({"encode_in_job": True}, False)):
        raw["system_settings"] = {"memt": {"endpoint": "http://127.0.0.1:9/v1", **memt}}
        need = servers.needs(load_config(raw), [rollout])
        assert need.embeddings is served and need.systems == {"memt"}, memt
