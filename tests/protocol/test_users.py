"""Simulated users: seeded personas, validated banks, the critic-editor loop, leak checks.

LLM calls go through the real openai client to a loopback fake endpoint; control-flow tests pin
the endpoint's replies per role (json_schema name) with a script file.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from memprobe import CATEGORIES
from memprobe.config.loading import load_config
from memprobe.llm.client import LLM, client_for
from memprobe.protocol import users
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Bank,
    BankEntry,
    Persona,
    Tasks,
)
from memprobe.spec.taxonomy import load_guides, load_pool
from memprobe.workflow import paths
from tests.helpers.jobs import ScriptJob
from tests.helpers.paper import all_text, merged, paper_config, stage_prompt
from tests.helpers.protocol import EPISODE, SKILL, TWO_ENTRY_BANK, clients, persona, user_text
from tests.helpers.workflow import ROOT, tiny_config

POOL = load_pool()

GUIDES = load_guides()

SKILLS = POOL.names("skill_memory")

TASK_PROMPTS = {
    "write": str(prompt_path("task_write")),
    "critic": str(prompt_path("task_critic")),
    "edit": str(prompt_path("task_edit")),
}

ONLY_SKILL_2 = {c: (2 if c == "skill_memory" else 0) for c in CATEGORIES}


def make_clients(base_url: str, tmp_path: Path, *, seed: int = 7, **llm) -> dict[str, LLM]:
    cfg = tiny_config(base_url, seed=seed)
    cfg["llm"].update(cache_dir=str(tmp_path / "cache"), **llm)
    config = load_config(cfg)
    ledger = tmp_path / "usage.csv"
    roles = ("generator", "task_writer", "critic", "editor")
    return {r: client_for(r, config, ledger_path=ledger) for r in roles}


def dim(name: str, short: str = "reads manuals twice before starting") -> dict:
    return {"name": name, "short": short, "explanation": "Grounded in their job. It shows."}


GOOD = {"dims": [dim(SKILLS[0]), dim(SKILLS[1])]}

MADE_UP = {"dims": [dim(SKILLS[0]), dim("telepathy_skill")]}

DUPLICATE = {"dims": [dim(SKILLS[0]), dim(SKILLS[0])]}

WRONG_COUNT = {"dims": [dim(SKILLS[0])]}

LONG_SHORT = {"dims": [dim(SKILLS[0]), dim(SKILLS[1], " ".join(["word"] * 16))]}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (MADE_UP, "dims[1]: 'telepathy_skill' is not a skill_memory dimension of the pool"),
        (DUPLICATE, f"dims[1]: duplicate dimension '{SKILLS[0]}'"),
        (WRONG_COUNT, "expected exactly 2 dims, got 1"),
        (LONG_SHORT, f"dims[1] ({SKILLS[1]}): short has 16 words, expected 1-15"),
    ],
    ids=["made_up", "duplicate", "count", "long_short"],
)
def test_check_bank_dims_names_the_problem(reply, expected):
    with pytest.raises(ValueError) as err:
        users.check_bank_dims(reply["dims"], SKILLS, 2, "skill_memory")
    assert str(err.value) == f"bank skill_memory: {expected}"


def test_check_bank_dims_accepts_a_good_reply():
    users.check_bank_dims(GOOD["dims"], SKILLS, 2, "skill_memory")


def test_bank_recovers_by_reasking(scripted, tmp_path):
    # Every bad reply breaks the enum/count the request's schema carries; the endpoint sends
    # them anyway, so our validation must catch each and re-ask with the reason.
    ep, seen = scripted({"generator": [MADE_UP, DUPLICATE, WRONG_COUNT, LONG_SHORT, GOOD]})
    llm = make_clients(ep.base_url, tmp_path, max_reasks=4)["generator"]
    bank = users.make_bank(
        persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select"))
    )
    assert [e.dimension for e in bank.entries] == [SKILLS[0], SKILLS[1]]
    sent = seen["generator"]
    assert len(sent) == 5
    schema = sent[0]["response_format"]["json_schema"]
    assert schema["name"] == "generator"
    dims_schema = schema["schema"]["properties"]["dims"]
    assert dims_schema["minItems"] == dims_schema["maxItems"] == 2
    name_enum = schema["schema"]["$defs"]["BankDim"]["properties"]["name"]["enum"]
    assert name_enum == SKILLS
    # Each re-ask tells the model what was wrong with its previous reply.
    feedback = [req["messages"][-1]["content"] for req in sent[1:]]
    for text, problem in zip(
        feedback,
        [
            "is not a skill_memory dimension",
            "duplicate dimension",
            "expected exactly 2",
            "16 words",
        ],
        strict=True,
    ):
        assert problem in text


def test_bank_past_its_budget_keeps_what_validates_and_replaces_the_rest(scripted, tmp_path):
    ep, seen = scripted({"generator": [MADE_UP, DUPLICATE, MADE_UP, GOOD]})
    llm = make_clients(ep.base_url, tmp_path, max_reasks=2)["generator"]
    bank = users.make_bank(
        persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select"))
    )
    assert len(seen["generator"]) == 3  # 1 ask + 2 re-asks, then the stand-in: no more calls
    # The latest reply's valid pick stays; the made-up one is replaced by another dimension of
    # the category (no earlier reply had a valid one: the pool's first example value).
    second = POOL.categories["skill_memory"].dimensions[1]
    assert [(e.dimension, e.short) for e in bank.entries] == [
        (SKILLS[0], "reads manuals twice before starting"),
        (SKILLS[1], second.answer_space[0]),
    ]
    assert bank.entries[1].explanation == second.axis
    [rec] = bank.recoveries
    assert rec.stage == "bank" and rec.where == "user user_001, bank skill_memory"
    assert "'telepathy_skill' is not a skill_memory dimension" in rec.problem
    assert f"{SKILLS[1]}: the pool's first example value" in rec.action


LONG = "In the center of the axis, the person would like to be helped in a way that is slow"


def test_an_overlong_short_is_shortened_by_a_dedicated_call(scripted, tmp_path):
    long_reply = {"dims": [dim(SKILLS[0]), dim(SKILLS[1], LONG)]}
    shortened = {"short": "wants slow, patient help"}
    ep, seen = scripted(
        {"generator": {"when": [[["VALUE TO TIGHTEN"], shortened]], "else": long_reply}}
    )
    llm = make_clients(ep.base_url, tmp_path, max_reasks=1, resample_invalid=0)["generator"]
    bank = users.make_bank(
        persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select"))
    )
    assert [e.short for e in bank.entries] == [
        "reads manuals twice before starting",
        "wants slow, patient help",
    ]
    shorten = [b for b in seen["generator"] if "VALUE TO TIGHTEN" in user_text(b)]
    assert len(shorten) == 1 and LONG in user_text(shorten[0])
    [rec] = bank.recoveries
    assert rec.action == f"{SKILLS[1]}: short shortened by a dedicated call"
    assert "short has 19 words, expected 1-15" in rec.problem


def test_a_short_the_shortening_call_cannot_fix_is_cut_at_a_clause(scripted, tmp_path):
    long_reply = {"dims": [dim(SKILLS[0]), dim(SKILLS[1], LONG)]}
    ep, _ = scripted({"generator": {"else": long_reply}})  # the shortening call gets it too
    llm = make_clients(ep.base_url, tmp_path, max_reasks=1, resample_invalid=0)["generator"]
    bank = users.make_bank(
        persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select"))
    )
    assert bank.entries[1].short == "In the center of the axis"
    assert "cut to 15 words" in bank.recoveries[0].action


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
    clients = make_clients(ep.base_url, tmp_path)
    return users.make_tasks(
        persona(), one_entry_bank(), GUIDES, clients, TASK_PROMPTS, max_edits=max_edits
    )


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


def test_leak_share_counts_echoed_target_words():
    short = "budgets every expense in a spreadsheet"
    assert users.leak_share("Can you help me plan a birthday party?", short) == 0.0
    # budgeting ~ budgets, spreadsheet: 2 of 3 content words (budget, expense, spreadsheet).
    assert users.leak_share("Help me with budgeting in my spreadsheet", short) == round(2 / 3, 4)


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
    clients = make_clients(ep.base_url, tmp_path)
    tasks = users.make_tasks(persona(), bank, GUIDES, clients, TASK_PROMPTS, leak_threshold=0.5)
    first, second = tasks.tasks
    assert first.leak_share == 1.0 and first.leak_flag
    assert second.leak_share == 0.0 and not second.leak_flag
    assert tasks.leak.flagged == [1]
    assert tasks.leak.max_share == 1.0 and tasks.leak.mean_share == 0.5


def ledger_cached(path: Path) -> list[str]:
    with open(path, newline="") as fh:
        return [row["cached"] for row in csv.DictReader(fh)]


def build_user(base_url: str, tmp_path: Path, seed: int, user_id: str = "user_001"):
    llm = make_clients(base_url, tmp_path, seed=seed)["generator"]
    p = users.make_persona(seed, user_id, llm, str(prompt_path("persona_narrative")))
    counts = dict(zip(CATEGORIES, (3, 3, 2, 2, 2), strict=True))
    bank = users.make_bank(p, counts, POOL, GUIDES, llm, str(prompt_path("bank_select")))
    return p, bank


def test_same_seed_same_persona_and_bank_on_a_cached_run(endpoint, tmp_path):
    p1, b1 = build_user(endpoint.base_url, tmp_path, seed=11)
    first = ledger_cached(tmp_path / "usage.csv")
    p2, b2 = build_user(endpoint.base_url, tmp_path, seed=11)
    second = ledger_cached(tmp_path / "usage.csv")[len(first) :]
    assert first and set(first) == {"false"}
    assert len(second) == len(first) and set(second) == {"true"}  # the rerun made no call
    assert p1 == p2
    assert [e.dimension for e in b1.entries] == [e.dimension for e in b2.entries]
    assert b1 == b2


def test_different_seed_changes_the_attributes():
    a, b = users.sample_attributes(11, "user_001"), users.sample_attributes(12, "user_001")
    keys = ("name", "age", "gender", "location", "occupation")
    assert [a[k] for k in keys] != [b[k] for k in keys]
    # ...and users of one run differ from each other.
    assert users.sample_attributes(11, "user_002")["seed"] != a["seed"]


def test_occupations_fit_the_age():
    people = [users.sample_attributes(0, f"user_{i:03d}") for i in range(1, 301)]
    ages = {p["age"] for p in people}
    assert min(ages) < 13 and max(ages) >= 66  # the sample covers children and retirees
    for p in people:
        age, job = p["age"], p["occupation"]
        if age < 18:
            assert job.endswith("school student"), (age, job)
        elif age >= users.RETIREMENT_AGE:
            assert job.startswith("retired "), (age, job)
        else:
            assert not job.startswith("retired ") and "school student" not in job, (age, job)
        assert job not in users._BROKEN_JOBS and "," not in job
        assert p["age_group"] == users.age_group(age)
        assert 1 <= p["n_stories"] <= 3


def test_persona_narrative_follows_the_attributes(scripted, tmp_path):
    attrs = users.sample_attributes(5, "user_009")
    n = attrs["n_stories"]
    story = "When they were younger they moved house and learned to adapt quickly."
    good = {
        "values": "Family first, and keeping promises made to friends.",
        "attitude": "Steady and hopeful, even after setbacks.",
        "coping": "Goes for a long walk.",
        "stories": [story] * n,
        "interests": ["chess", "gardening"],
    }
    wrong_count = {**good, "stories": [story] * (n + 1)}
    ep, seen = scripted({"generator": [wrong_count, good]})
    llm = make_clients(ep.base_url, tmp_path, max_reasks=1)["generator"]
    p = users.make_persona(5, "user_009", llm, str(prompt_path("persona_narrative")))
    sent = seen["generator"]
    assert len(p.stories) == n and len(sent) == 2  # the wrong story count was re-asked
    prompt_text = sent[0]["messages"][-1]["content"]
    for value in (p.name, str(p.age), p.location.city, p.occupation, p.values_orientation):
        assert value in prompt_text
    assert users.life_stage(p.age, p.occupation) in prompt_text
    props = sent[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert props["stories"]["minItems"] == props["stories"]["maxItems"] == n
    # bounded fields, sized like the release's profiles (~2.9k characters in all)
    assert props["attitude"]["maxLength"] <= 900 and props["values"]["maxLength"] <= 400


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


@pytest.mark.workflow
def test_a_bad_pool_stops_the_dag_in_one_line(endpoint, workflow_factory):
    wf = workflow_factory(tiny_config(endpoint.base_url))
    pool = wf.root / "config" / "dimension_pool.yaml"
    pool.write_text(pool.read_text().replace("name: writing_skill", "name: Writing Skill", 1))
    proc = wf.run("-n", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("memprobe:")]
    assert lines and "config/dimension_pool.yaml" in lines[0] and "not snake_case" in lines[0]
    assert not (wf.root / "results").exists()


def test_pool_sample_is_seeded_covers_n_and_limits_the_reply_enum():
    a = users.pool_candidates(POOL, "skill_memory", 2, 6, seed=11)
    b = users.pool_candidates(POOL, "skill_memory", 2, 6, seed=11)
    c = users.pool_candidates(POOL, "skill_memory", 2, 6, seed=12)
    assert [d.name for d in a] == [d.name for d in b] != [d.name for d in c]
    assert len(a) == 6 and set(d.name for d in a) <= set(POOL.names("skill_memory"))
    assert len(users.pool_candidates(POOL, "skill_memory", 8, 6, seed=1)) == 8  # never < n
    assert len(users.pool_candidates(POOL, "skill_memory", 2, None, seed=1)) == len(
        POOL.names("skill_memory")
    )


def test_compact_pool_listing_reaches_the_prompt(tmp_path):
    raw = tiny_config("http://unused")
    raw["llm"] = {"backend": "fake", "cache_dir": str(tmp_path / "c")}
    cfg = load_config(raw)
    seen: list[list[dict]] = []
    llm = client_for("generator", cfg)
    real_json = llm.json

    def spy(messages, schema, **kw):
        seen.append(messages)
        return real_json(messages, schema, **kw)

    llm.json = spy  # type: ignore[method-assign]
    counts = {c: (1 if c == "skill_memory" else 0) for c in CATEGORIES}
    p = persona()
    bank = users.make_bank(
        p, counts, POOL, GUIDES, llm, str(prompt_path("bank_select")),
        pool_sample=4, show_examples=False,
    )  # fmt: skip
    shown = users.pool_candidates(POOL, "skill_memory", 1, 4, p.seed)
    prompt = seen[0][-1]["content"]
    assert all(f"- {d.name}: {d.axis}" in prompt for d in shown)
    assert "[e.g." not in prompt
    assert bank.entries[0].dimension in {d.name for d in shown}


def test_writer_gets_the_category_hint_and_labelled_earlier_tasks(scripted, tmp_path):
    ep, seen = scripted(
        {
            "task_writer": [draft("Help me sort my reading list."), draft("Help me pack.")],
            "critic": [verdict("neutral", "none")] * 2,
        }
    )
    _, llm = clients(ep.base_url, tmp_path, "task_writer", "critic", "editor")
    users.make_tasks(persona(), TWO_ENTRY_BANK, GUIDES, llm, TASK_PROMPTS)
    first, second = seen["task_writer"]
    hints = users.load_guides(users.HINTS_FILE)
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
    users.make_tasks(persona(), one, GUIDES, llm, TASK_PROMPTS)
    text = user_text(seen["editor"][0])
    assert SKILL.explanation in text and SKILL.short in text and SKILL.dimension in text
    assert users.persona_block(persona()) in text


def test_short_repeating_the_axis_is_invalid():
    axis = "How well do they translate needs into concrete requirements before acting?"
    dims = [{"name": "d", "short": axis, "explanation": "e"}]
    with pytest.raises(ValueError, match=r"short repeats the axis question"):
        users.check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})
    dims[0]["short"] = "Translate needs into concrete requirements"
    with pytest.raises(ValueError, match=r"short repeats the axis question"):
        users.check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})
    dims[0]["short"] = "Writes a one-page spec with the client before building"
    users.check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})


def test_small_model_listing_hides_the_axis_questions():
    from memprobe.spec.taxonomy import load_pool
    from tests.helpers.recording_llm import RecordingLLM

    pool = load_pool()
    shown = users.pool_candidates(pool, "skill_memory", 1, 4, persona().seed)
    pick = {"name": shown[0].name, "short": "fixes bikes", "explanation": "e"}
    counts = {c: int(c == "skill_memory") for c in users.CATEGORIES}
    for show_axes in (True, False):
        llm = RecordingLLM(lambda m, s: {"dims": [pick]})
        prompt = str(prompt_path("bank_select"))
        users.make_bank(persona(), counts, pool, GUIDES, llm, prompt, 4, False, show_axes)
        assert (shown[0].axis in llm.prompt_text(0)) is show_axes


# -- jobs whose replies never validate: each stage's recovery, recorded --------------------
# max_reasks 1, resample_invalid 0: a reply and one re-ask, then the stage's stand-in.
SPENT = {"max_reasks": 1, "resample_invalid": 0}
USER = {"user": "user_001"}


def test_persona_job_past_its_re_asks_keeps_the_usable_fields(scripted, tmp_path, monkeypatch):
    ep, seen = scripted({"generator": {"else": {"values": "Family first, always.", "x": 1}}})
    job = ScriptJob(tmp_path, monkeypatch, "persona", ep.base_url, **SPENT)
    prompt = str(prompt_path("persona_narrative"))
    assert job.run({"prompt": prompt}, {"persona": "persona.json"}, USER) == 0
    p = records.load(job.out("persona.json"), Persona)
    assert p.values == "Family first, always." and p.stories == [] and p.attitude == ""
    [rec] = p.recoveries
    assert rec.stage == "persona" and rec.where == "user user_001, persona"
    assert "left empty: attitude, coping, stories, interests" in rec.action
    assert len(seen["generator"]) == 2
    assert job.recoveries(USER).recoveries == [rec]  # for the run's last lines


def test_bank_job_past_its_re_asks_shortens_each_long_short(scripted, tmp_path, monkeypatch):
    firsts = {c: POOL.names(c)[0] for c in CATEGORIES}
    rules = [[["VALUE TO TIGHTEN"], {"short": "wants slow, patient help"}]]
    rules += [[[f"POOL FOR {c}"], {"dims": [dim(n, LONG)]}] for c, n in firsts.items()]
    ep, _ = scripted({"generator": {"when": rules}})
    job = ScriptJob(tmp_path, monkeypatch, "bank", ep.base_url, **SPENT)
    inputs = {
        "persona": persona(),
        "pool": str(ROOT / "config" / "dimension_pool.yaml"),
        "guides": str(ROOT / "prompts" / "category_guides.yaml"),
        "prompt": str(prompt_path("bank_select")),
        "shorten": str(prompt_path("bank_shorten")),
    }
    assert job.run(inputs, {"bank": "bank.json"}, USER) == 0
    bank = records.load(job.out("bank.json"), Bank)
    assert [e.dimension for e in bank.entries] == list(firsts.values())
    assert {e.short for e in bank.entries} == {"wants slow, patient help"}
    assert [r.stage for r in bank.recoveries] == ["bank"] * 5
    assert all("shortened by a dedicated call" in r.action for r in bank.recoveries)
    assert len(job.recoveries(USER).recoveries) == 5


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
    users.make_tasks(
        persona(), TWO_ENTRY_BANK, GUIDES, llm, {k: stage_prompt(cfg, v) for k, v in stages.items()}
    )
    writer = all_text(seen["task_writer"][1])
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in writer
    assert "I've got two repairs coming up this month" in writer  # a worked neutral example
    critic = all_text(seen["critic"][1])
    assert "adjectives that match the expected stance" in critic
    assert EPISODE.short not in critic and EPISODE.dimension not in critic  # still blind
    text = user_text(seen["editor"][0])
    assert "skill_memory/critical_thinking_skill: Help me sort my reading list." in text
    assert GUIDES["episodic_memory"] in text
    assert EPISODE.short in text and EPISODE.explanation in text
    assert users.persona_block(persona(), stories=False) in text
    assert "A story." not in text  # the compact profile, as the release's editor read it
    assert seen["editor"][0]["temperature"] == 0.5


def test_paper_bank_prompt_asks_for_a_non_generic_stance_and_shows_earlier_explanations():
    from memprobe.spec.taxonomy import load_pool
    from tests.helpers.recording_llm import RecordingLLM

    cfg = load_config(merged("config/config.yaml", "config/paper.yaml"))
    pool = load_pool()

    def answer(messages, schema):
        enum = schema.model_json_schema()["$defs"]["BankDim"]["properties"]["name"]["enum"]
        return {"dims": [{"name": enum[0], "short": "fixes bikes", "explanation": "EXPL-1."}]}

    llm = RecordingLLM(answer)
    counts = {c: int(c in ("skill_memory", "knowledge_memory")) for c in users.CATEGORIES}
    users.make_bank(persona(), counts, pool, GUIDES, llm, stage_prompt(cfg, "bank_select"))
    first, second = llm.prompt_text(0), llm.prompt_text(1)
    assert "meaningful, non-generic stance" in first and "most people would not share" not in first
    assert "Gaps, misconceptions and\n  weaknesses matter as much as strengths" in first
    assert "EXPL-1." in second  # the earlier category with its explanation
    assert pool.categories["knowledge_memory"].dimensions[0].axis in second
