"""The tasks stage (memprobe/protocol/tasks.py): the writer, the blind critic and the editor's
loop, what each sees, and a job past its re-asks.

LLM calls go through the real openai client to a loopback fake endpoint; control-flow tests pin
the endpoint's replies per role (json_schema name) with a script file.
"""

from __future__ import annotations

import json

import pytest

from memprobe.llm.client import client_for
from memprobe.protocol.persona import (
    persona_block,
)
from memprobe.protocol.tasks import HINTS_FILE, make_tasks
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Bank,
    BankEntry,
    Tasks,
)
from memprobe.spec.taxonomy import load_guides, load_pool
from memprobe.workflow import paths
from tests.helpers.jobs import ScriptJob
from tests.helpers.paper import all_text, paper_config, stage_prompt
from tests.helpers.protocol import (
    EPISODE,
    SKILL,
    SPENT,
    TWO_ENTRY_BANK,
    USER,
    clients,
    ledger_cached,
    persona,
    stage_clients,
    user_text,
)
from tests.helpers.workflow import ROOT, tiny_config

POOL = load_pool()


GUIDES = load_guides()


SKILLS = POOL.names("skill_memory")


TASK_PROMPTS = {
    "write": str(prompt_path("task_write")),
    "critic": str(prompt_path("task_critic")),
    "edit": str(prompt_path("task_edit")),
}


def one_entry_bank() -> Bank:
    entry = BankEntry(
        category="assistance_preference",
        dimension="verbosity_preference",
        short="wants one-line answers without background",
        explanation="Busy nurse. Reads on breaks.",
    )
    return Bank(user_id="user_001", entries=[entry])


def verdict(v: str, trait: str = "prefers brevity") -> dict:
    return {"inferred_trait": trait, "verdict": v, "why": "it says so"}


def draft(text: str) -> dict:
    return {"task": text, "rationale": "it would come up"}


def run_tasks(ep, tmp_path, max_edits):
    clients = stage_clients(ep.base_url, tmp_path)
    return make_tasks(
        persona(), one_entry_bank(), GUIDES, clients, TASK_PROMPTS, max_edits=max_edits
    )


# -- jobs whose replies never validate: each stage's stand-in, recorded --------------------
# max_reasks 1, resample_invalid 0: a reply and one re-ask, then the stage's stand-in.


def run_tasks_job(ep, tmp_path, monkeypatch) -> Tasks:
    job = ScriptJob(tmp_path, monkeypatch, "tasks", ep.base_url, **SPENT)
    inputs = {
        "persona": persona(),
        "bank": TWO_ENTRY_BANK,
        "guides": str(ROOT / "prompts" / "category_guides.yaml"),
        "hints": str(ROOT / "prompts" / "elicitation_hints.yaml"),
        "write": TASK_PROMPTS["write"],
        "critic": TASK_PROMPTS["critic"],
        "edit": TASK_PROMPTS["edit"],
    }
    assert job.run(inputs, {"tasks": "tasks.json"}, USER) == 0
    tasks = records.load(job.out("tasks.json"), Tasks)
    assert job.recoveries(USER).recoveries == tasks.recoveries
    return tasks


def test_critic_fishing_twice_then_neutral(scripted, tmp_path):
    ep, sent = scripted(
        {
            "task_writer": [draft("Give me the short version of the shift rota rules.")],
            "critic": [verdict("fishing"), verdict("fishing"), verdict("neutral", "none")],
            "editor": [
                draft("Can you explain our shift rota rules?"),
                draft("Help me plan shifts."),
            ],
        }
    )
    tasks = run_tasks(ep, tmp_path, max_edits=3)
    task = tasks.tasks[0]
    assert task.status == "neutral"
    assert [v.verdict for v in task.verdicts] == ["fishing", "fishing", "neutral"]
    assert task.revisions == [
        "Give me the short version of the shift rota rules.",
        "Can you explain our shift rota rules?",
    ]
    assert task.task == "Help me plan shifts."
    assert (len(sent["critic"]), len(sent["editor"])) == (3, 2)
    # The critic is blind: it never sees the target.
    for req in sent["critic"]:
        text = json.dumps(req["messages"])
        assert "one-line answers" not in text and "verbosity_preference" not in text
    assert tasks.leak is not None and tasks.leak.edited == 1 and tasks.leak.budget_spent == 0
    # The record round-trips through its file type.
    assert Tasks.model_validate_json(tasks.model_dump_json()) == tasks


def test_critic_always_fishing_spends_the_budget(scripted, tmp_path):
    ep, sent = scripted(
        {
            "task_writer": [draft("Keep it short: what are the rota rules?")],
            "critic": [verdict("fishing")] * 6,
            "editor": [draft(f"Edit {i}: what are the rota rules?") for i in range(1, 6)],
        }
    )
    tasks = run_tasks(ep, tmp_path, max_edits=2)
    task = tasks.tasks[0]
    assert task.status == "fishing_budget_spent"
    assert [v.verdict for v in task.verdicts] == ["fishing"] * 3
    assert len(task.revisions) == 2 and task.task == "Edit 2: what are the rota rules?"
    assert (len(sent["critic"]), len(sent["editor"])) == (3, 2)
    assert tasks.leak.budget_spent == 1


def test_leak_report_flags_tasks_over_the_threshold(scripted, tmp_path):
    bank = Bank(
        user_id="user_001",
        entries=[
            BankEntry(
                category="skill_memory",
                dimension=SKILLS[0],
                short="budgets every expense in a spreadsheet",
                explanation="Accountant.",
            ),
            BankEntry(
                category="skill_memory",
                dimension=SKILLS[1],
                short="repairs bicycles without manuals",
                explanation="Mechanic.",
            ),
        ],
    )
    ep, _ = scripted(
        {
            "task_writer": [
                draft("Help me track every expense in my budget spreadsheet."),
                draft("What should I pack for a weekend hike?"),
            ],
            "critic": [verdict("neutral", "none")] * 2,
        }
    )
    clients = stage_clients(ep.base_url, tmp_path)
    tasks = make_tasks(persona(), bank, GUIDES, clients, TASK_PROMPTS, leak_threshold=0.5)
    first, second = tasks.tasks
    assert first.leak_share == 1.0 and first.leak_flag
    assert second.leak_share == 0.0 and not second.leak_flag
    assert tasks.leak.flagged == [1]
    assert tasks.leak.max_share == 1.0 and tasks.leak.mean_share == 0.5


@pytest.mark.workflow
def test_workflow_rerun_of_users_replays_the_cache(endpoint, workflow_factory):
    wf = workflow_factory(tiny_config(endpoint.base_url, n_users=1))
    # the tasks job's own file, in the shared users' folder (docs/runs.md): the run's copy
    # would stand in for it on the rerun
    target = f"{paths.of(wf.cfg).users['tasks']}/user_001/tasks.json"
    wf.run(target)
    # made in the shared users' folders (docs/runs.md), one per file and its settings
    made = {f"{part}.json": wf.shared(part) / "user_001" for part in ("persona", "bank", "tasks")}
    first = {f: (d / f).read_text() for f, d in made.items()}
    tasks = Tasks.model_validate_json(first["tasks.json"])
    assert len(tasks.tasks) == 5 and tasks.leak is not None
    ledgers = sorted(p for d in wf.users for p in (d / "usage").rglob("*.csv"))
    before = {p: ledger_cached(p) for p in ledgers}
    assert ledgers and all(before.values())
    for f, d in made.items():
        (d / f).unlink()
    wf.run(target)
    assert {f: (d / f).read_text() for f, d in made.items()} == first
    # The rerun's rows are all cache hits: zero calls. A job rerun on unchanged inputs carries
    # its finished attempt's rows first (memprobe/workflow/step.py); those are the first run's own.
    for p in ledgers:
        after = ledger_cached(p)
        carried = after[: len(before[p])] == before[p] and len(after) > len(before[p])
        assert set(after[len(before[p]) :] if carried else after) == {"true"}


def test_writer_gets_the_category_hint_and_labelled_earlier_tasks(scripted, tmp_path):
    ep, seen = scripted(
        {
            "task_writer": [draft("Help me sort my reading list."), draft("Help me pack.")],
            "critic": [verdict("neutral", "none")] * 2,
        }
    )
    _, llm = clients(ep.base_url, tmp_path, "task_writer", "critic", "editor")
    make_tasks(persona(), TWO_ENTRY_BANK, GUIDES, llm, TASK_PROMPTS)
    first, second = seen["task_writer"]
    hints = load_guides(HINTS_FILE)
    assert hints["episodic_memory"] in user_text(second)
    assert hints["skill_memory"] not in user_text(second)
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in user_text(
        second
    )
    assert "(none yet)" in user_text(first)
    assert second["temperature"] == 0.7  # the task writer's own role, not the generator's 0.8


def test_editor_sees_the_full_target_and_the_profile(scripted, tmp_path):
    ep, seen = scripted(
        {
            "task_writer": [draft("I double-check everything; help me plan.")],
            "critic": [verdict("fishing"), verdict("neutral", "none")],
            "editor": [draft("Help me plan a research trip.")],
        }
    )
    _, llm = clients(ep.base_url, tmp_path, "task_writer", "critic", "editor")
    one = Bank(user_id="user_001", entries=[SKILL])
    make_tasks(persona(), one, GUIDES, llm, TASK_PROMPTS)
    text = user_text(seen["editor"][0])
    assert SKILL.explanation in text and SKILL.short in text and SKILL.dimension in text
    assert persona_block(persona()) in text


def test_tasks_job_past_the_writer_re_asks_takes_its_prose(scripted, tmp_path, monkeypatch):
    prose = "Could you help me plan the week before my sister's visit?"
    ep, _ = scripted({"task_writer": {"else": prose}, "critic": {"else": verdict("neutral")}})
    tasks = run_tasks_job(ep, tmp_path, monkeypatch)
    assert [t.task for t in tasks.tasks] == [prose, prose]
    assert [(r.stage, r.action) for r in tasks.recoveries] == [
        ("task_writer", "the latest reply's text as the task")
    ] * 2


def test_tasks_job_past_the_critic_re_asks_uses_the_leak_check(scripted, tmp_path, monkeypatch):
    echo = f"I always {SKILL.short}; help me with a report."  # echoes the target
    ep, _ = scripted({"task_writer": {"else": draft(echo)}, "critic": {"else": {"verdict": 3}}})
    tasks = run_tasks_job(ep, tmp_path, monkeypatch)
    first = tasks.tasks[0]
    # The leak check calls the echo fishing; the editor (fake replies) rewrites it.
    assert first.verdicts[0].verdict == "fishing" and first.revisions == [echo]
    assert tasks.recoveries[0].stage == "critic"
    assert tasks.recoveries[0].action.startswith("verdict fishing from the leak check")


def test_tasks_job_past_the_editor_re_asks_keeps_the_request(scripted, tmp_path, monkeypatch):
    ep, _ = scripted(
        {
            "task_writer": {"else": draft("Help me pick a used car.")},
            "critic": {"else": verdict("fishing")},
            "editor": {"else": {"nope": 1}},
        }
    )
    tasks = run_tasks_job(ep, tmp_path, monkeypatch)
    assert [(t.task, t.status, t.revisions) for t in tasks.tasks] == [
        ("Help me pick a used car.", "fishing_budget_spent", [])
    ] * 2
    assert [r.stage for r in tasks.recoveries] == ["editor", "editor"]
    assert "kept the unedited request" in tasks.recoveries[0].action


def test_paper_task_stages_see_what_the_releases_saw(scripted, tmp_path):
    ep, seen = scripted(
        {
            "task_writer": [draft("Help me sort my reading list."), draft("I moved once; plan.")],
            "critic": [verdict("neutral", "none"), verdict("fishing"), verdict("neutral", "n")],
            "editor": [draft("Help me plan a move across town.")],
        }
    )
    cfg = paper_config(ep.base_url, tmp_path)
    llm = {r: client_for(r, cfg) for r in ("task_writer", "critic", "editor")}
    stages = {"write": "task_write", "critic": "task_critic", "edit": "task_edit"}
    make_tasks(
        persona(), TWO_ENTRY_BANK, GUIDES, llm, {k: stage_prompt(cfg, v) for k, v in stages.items()}
    )
    writer = all_text(seen["task_writer"][1])
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in writer
    assert "The boiler and the back door both need fixing" in writer  # a worked neutral example
    critic = all_text(seen["critic"][1])
    assert "adjectives that match the expected stance" in critic
    assert EPISODE.short not in critic and EPISODE.dimension not in critic  # still blind
    text = user_text(seen["editor"][0])
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in text
    assert GUIDES["episodic_memory"] in text
    assert EPISODE.short in text and EPISODE.explanation in text
    assert persona_block(persona(), stories=False) in text
    assert "A story." not in text  # the compact profile, as the release's editor read it
    assert seen["editor"][0]["temperature"] == 0.5
