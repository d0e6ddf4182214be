"""``rollout.replay``: memory systems driven through the release fixture's recorded
conversations by real Snakemake jobs against the loopback endpoint, which records every request.

Each conversational role gets its own model name, so a request from one of them would show in
the endpoint's record as well as in the ledgers.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from memprobe.llm import ledger
from memprobe.spec.records import Episodes, Memories
from tests.helpers.endpoint import record_requests
from tests.helpers.release_fixture import FIXTURE, longctx_items, recorded, release_users_config

pytestmark = pytest.mark.workflow

RUN = "longctx_full_pooled_50"
USERS = ("user_001", "user_002")
N_DIMS = 8  # the fixture's 2/2/2/1/1
CONVERSATION = ("assistant", "simulator", "preference")
MODELS = {role: f"{role}-model" for role in CONVERSATION}


def replay_config(base_url: str, systems: list[str], **over) -> dict:
    over = {"rollout": {"replay": RUN}, **over}
    cfg = release_users_config(base_url, n_users=len(USERS), systems=systems, **over)
    cfg["llm"]["roles"] = {role: {"model": model} for role, model in MODELS.items()}
    return cfg


def ledger_rows(results: Path) -> list[dict[str, str]]:
    return ledger.read_rows(ledger.run_files(results))


def memprobe_lines(proc) -> list[str]:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    return [line for line in out.splitlines() if line.startswith("memprobe:")]


def test_replay_through_longctx_and_nomem_makes_no_conversation_call(endpoint, workflow_factory):
    seen = record_requests(endpoint)
    cfg = replay_config(
        endpoint.base_url, ["nomem", "longctx_full"], compat={"longctx_drop_final_reply": True}
    )
    wf = workflow_factory(cfg)
    jobs = wf.scheduled(wf.target("table2.csv"))
    assert jobs["replay"] == 4 and "rollout" not in jobs and "preference" not in jobs, jobs
    wf.run(wf.target("table2.csv"))
    results = wf.results

    # No simulator, assistant or preference request reached the endpoint or a ledger.
    models = {body.get("model") for bodies in seen.values() for body in bodies}
    assert not models & set(MODELS.values()), models
    rows = ledger_rows(results)
    assert rows and not {r["role"] for r in rows} & set(CONVERSATION)
    assert not (results / "usage" / "rollout").exists()
    assert not list(results.glob("*/*/preference.json"))

    for user in USERS:
        # The transcript is the recording, turn by turn.
        eps = Episodes.model_validate_json(
            (results / "longctx_full" / user / "episodes.json").read_text()
        )
        assert eps.replay == RUN
        got = [
            [(t.agent_response, t.feedback_type, t.user_text) for t in e.turns]
            for e in eps.episodes
        ]
        want = [
            [
                (
                    t["agent_response"],
                    t["user_simulator"]["feedback_type"],
                    t["user_simulator"]["text"],
                )
                for t in ep["turns"]
            ]
            for ep in recorded(RUN, user)
        ]
        assert got == want
        assert [e.end_reason for e in eps.episodes] == [
            ep["end_reason"] for ep in recorded(RUN, user)
        ]
        # longctx_full's store: exactly the recorded turns, item by item, without each
        # task's final reply (compat.longctx_drop_final_reply).
        mem = Memories.model_validate_json(
            (results / "longctx_full" / user / "memories.json").read_text()
        )
        assert mem.memories == longctx_items(RUN, user, drop_final_reply=True)
        nomem = Memories.model_validate_json(
            (results / "nomem" / user / "memories.json").read_text()
        )
        assert nomem.memories == []
        # Scoring ran on the replayed stores.
        for mode in ("dump_all", "retrieve"):
            assert (results / "longctx_full" / user / mode / "judge.json").exists()
            assert (results / "longctx_full" / user / mode / "attribution.json").exists()

    # Table 2 says which conversations each row was built from; D is not applicable, A and C
    # are the recorded run's (here computed from its files) and say so.
    table = {r["system"]: r for r in csv.DictReader(open(results / "table2.csv"))}
    flags = {r["system"]: r for r in csv.DictReader(open(results / "table2_flags.csv"))}
    for system in ("nomem", "longctx_full"):
        row = table[system]
        assert row["conversations"] == f"replay: {RUN}"
        assert row["D_mean"] == "" and row["D_std"] == ""
        assert "not applicable" in flags[system]["D_mean"]
        assert f"recorded run's ({RUN})" in flags[system]["A"]
        assert f"recorded run's ({RUN})" in flags[system]["C_mean"]
        turns = [len(ep["turns"]) for u in USERS for ep in recorded(RUN, u)]
        c_per_user = [sum(turns[i : i + N_DIMS]) / N_DIMS for i in (0, N_DIMS)]
        assert float(row["C_mean"]) == pytest.approx(sum(c_per_user) / 2)
        assert row["B_dump_all_mean"] != ""
    assert "Replayed:" in (results / "report_header.rst").read_text()


def test_replay_through_amem_pays_only_its_writer_and_the_scoring(endpoint, workflow_factory):
    seen = record_requests(endpoint)
    cfg = replay_config(endpoint.base_url, ["amem"], modes=["dump_all", "retrieve"])
    wf = workflow_factory(cfg)
    modes = ("dump_all", "retrieve")
    targets = [wf.target(f"amem/{u}/{m}/judge.json") for u in USERS for m in modes]
    wf.run(*targets, timeout=1800)
    results = wf.results

    # The endpoint saw writer, slot-fill and judge requests only (every text request would be
    # an assistant reply: none), ...
    assert set(seen) == {"writer", "slotfill", "judge"}, sorted(seen)
    # ... and each one is on a ledger: one paid row per request, by role.
    rows = ledger_rows(results)
    for role, bodies in seen.items():
        paid = [r for r in rows if r["role"] == role and r["cached"] == "false"]
        assert len(paid) == len(bodies), role
    writer = [r for r in rows if r["role"] == "writer"]
    assert writer and all(r["job"].startswith("replay/amem_") for r in writer)
    # amem wrote one note per recorded user message (turn 1: the task), from the recording.
    for user in USERS:
        mem = Memories.model_validate_json((results / "amem" / user / "memories.json").read_text())
        want = []
        for ep in recorded(RUN, user):
            want.append(ep["task"])
            want += [t["user_simulator"]["text"] for t in ep["turns"]]
        assert [m["content"] for m in mem.memories] == want


def test_bad_replay_sources_stop_in_one_line(endpoint, workflow_factory, tmp_path):
    wf = workflow_factory(replay_config(endpoint.base_url, ["nomem"]))
    # an unknown run: the DAG does not load
    cfg = replay_config(endpoint.base_url, ["nomem"], rollout={"replay": "nosuch_pooled_50"})
    wf.write_config(cfg)
    proc = wf.run(wf.target("table2.csv"), "-n", check=False)
    (line,) = memprobe_lines(proc)
    assert proc.returncode != 0 and "no recorded run 'nosuch_pooled_50'" in line, line
    assert RUN in line  # it lists the runs there are

    # a run without one of the users
    copy = tmp_path / "release"
    shutil.copytree(FIXTURE, copy)
    shutil.rmtree(copy / "history" / RUN / "user_002")
    cfg = replay_config(endpoint.base_url, ["nomem"])
    cfg["release_dir"] = str(copy)
    wf.write_config(cfg)
    proc = wf.run(wf.target("table2.csv"), "-n", check=False)
    (line,) = memprobe_lines(proc)
    assert proc.returncode != 0 and f"run '{RUN}' has no user_002" in line, line

    # a malformed turn: the replay job stops in one line naming the file, and leaves nothing
    shutil.copytree(FIXTURE / "history" / RUN / "user_002", copy / "history" / RUN / "user_002")
    bad = copy / "history" / RUN / "user_001" / "episode_3.json"
    raw = json.loads(bad.read_text())
    del raw["turns"][0]["agent_response"]
    bad.write_text(json.dumps(raw))
    proc = wf.run(wf.target("nomem/user_001/memories.json"), check=False)
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    # (the run's closing line on stand-ins follows it)
    lines = {ln.split("memprobe: ", 1)[1] for ln in out.splitlines() if "memprobe: " in ln}
    (line,) = [ln for ln in lines if "stand-ins" not in ln]
    assert proc.returncode != 0 and f"{bad}: turns.0.agent_response" in line, line
    assert not (wf.results / "nomem" / "user_001" / "memories.json").exists()
