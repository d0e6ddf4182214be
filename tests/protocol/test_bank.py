"""The bank stage (memprobe/protocol/bank.py): validated picks from the pool, re-asks, shortened
shorts, the pool listing a config picks, and a job past its re-asks.

LLM calls go through the real openai client to a loopback fake endpoint; control-flow tests pin
the endpoint's replies per role (json_schema name) with a script file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe import CATEGORIES
from memprobe.config.loading import load_config
from memprobe.llm.client import client_for
from memprobe.protocol.bank import check_bank_dims, make_bank, pool_candidates
from memprobe.protocol.persona import (
    make_persona,
)
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Bank,
)
from memprobe.spec.taxonomy import load_guides, load_pool
from tests.helpers.jobs import ScriptJob
from tests.helpers.paper import merged, stage_prompt
from tests.helpers.protocol import SPENT, USER, ledger_cached, persona, stage_clients, user_text
from tests.helpers.workflow import ROOT, tiny_config

POOL = load_pool()


GUIDES = load_guides()


SKILLS = POOL.names("skill_memory")


ONLY_SKILL_2 = {c: (2 if c == "skill_memory" else 0) for c in CATEGORIES}


def dim(name: str, short: str = "reads manuals twice before starting") -> dict:
    return {"name": name, "short": short, "explanation": "Grounded in their job. It shows."}


GOOD = {"dims": [dim(SKILLS[0]), dim(SKILLS[1])]}


MADE_UP = {"dims": [dim(SKILLS[0]), dim("telepathy_skill")]}


DUPLICATE = {"dims": [dim(SKILLS[0]), dim(SKILLS[0])]}


WRONG_COUNT = {"dims": [dim(SKILLS[0])]}


LONG_SHORT = {"dims": [dim(SKILLS[0]), dim(SKILLS[1], " ".join(["word"] * 16))]}


LONG = "In the center of the axis, the person would like to be helped in a way that is slow"


def build_user(base_url: str, tmp_path: Path, seed: int, user_id: str = "user_001"):
    llm = stage_clients(base_url, tmp_path, seed=seed)["generator"]
    p = make_persona(seed, user_id, llm, str(prompt_path("persona_narrative")))
    counts = dict(zip(CATEGORIES, (3, 3, 2, 2, 2), strict=True))
    bank = make_bank(p, counts, POOL, GUIDES, llm, str(prompt_path("bank_select")))
    return p, bank


# -- jobs whose replies never validate: each stage's stand-in, recorded --------------------
# max_reasks 1, resample_invalid 0: a reply and one re-ask, then the stage's stand-in.


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
        check_bank_dims(reply["dims"], SKILLS, 2, "skill_memory")
    assert str(err.value) == f"bank skill_memory: {expected}"


def test_check_bank_dims_accepts_a_good_reply():
    check_bank_dims(GOOD["dims"], SKILLS, 2, "skill_memory")


def test_bank_is_valid_after_a_re_ask(scripted, tmp_path):
    # Every bad reply breaks the enum/count the request's schema carries; the endpoint sends
    # them anyway, so our validation must catch each and re-ask with the reason.
    ep, seen = scripted({"generator": [MADE_UP, DUPLICATE, WRONG_COUNT, LONG_SHORT, GOOD]})
    llm = stage_clients(ep.base_url, tmp_path, max_reasks=4)["generator"]
    bank = make_bank(persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select")))
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
    llm = stage_clients(ep.base_url, tmp_path, max_reasks=2)["generator"]
    bank = make_bank(persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select")))
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


def test_an_overlong_short_is_shortened_by_a_dedicated_call(scripted, tmp_path):
    long_reply = {"dims": [dim(SKILLS[0]), dim(SKILLS[1], LONG)]}
    shortened = {"short": "wants slow, patient help"}
    ep, seen = scripted(
        {"generator": {"when": [[["VALUE TO TIGHTEN"], shortened]], "else": long_reply}}
    )
    llm = stage_clients(ep.base_url, tmp_path, max_reasks=1, resample_invalid=0)["generator"]
    bank = make_bank(persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select")))
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
    llm = stage_clients(ep.base_url, tmp_path, max_reasks=1, resample_invalid=0)["generator"]
    bank = make_bank(persona(), ONLY_SKILL_2, POOL, GUIDES, llm, str(prompt_path("bank_select")))
    assert bank.entries[1].short == "In the center of the axis"
    assert "cut to 15 words" in bank.recoveries[0].action


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
    a = pool_candidates(POOL, "skill_memory", 2, 6, seed=11)
    b = pool_candidates(POOL, "skill_memory", 2, 6, seed=11)
    c = pool_candidates(POOL, "skill_memory", 2, 6, seed=12)
    assert [d.name for d in a] == [d.name for d in b] != [d.name for d in c]
    assert len(a) == 6 and set(d.name for d in a) <= set(POOL.names("skill_memory"))
    assert len(pool_candidates(POOL, "skill_memory", 8, 6, seed=1)) == 8  # never < n
    assert len(pool_candidates(POOL, "skill_memory", 2, None, seed=1)) == len(
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
    bank = make_bank(
        p, counts, POOL, GUIDES, llm, str(prompt_path("bank_select")),
        pool_sample=4, show_examples=False,
    )  # fmt: skip
    shown = pool_candidates(POOL, "skill_memory", 1, 4, p.seed)
    prompt = seen[0][-1]["content"]
    assert all(f"- {d.name}: {d.axis}" in prompt for d in shown)
    assert "[e.g." not in prompt
    assert bank.entries[0].dimension in {d.name for d in shown}


def test_short_repeating_the_axis_is_invalid():
    axis = "How well do they translate needs into concrete requirements before acting?"
    dims = [{"name": "d", "short": axis, "explanation": "e"}]
    with pytest.raises(ValueError, match=r"short repeats the axis question"):
        check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})
    dims[0]["short"] = "Translate needs into concrete requirements"
    with pytest.raises(ValueError, match=r"short repeats the axis question"):
        check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})
    dims[0]["short"] = "Writes a one-page spec with the client before building"
    check_bank_dims(dims, ["d"], 1, "skill_memory", {"d": axis})


def test_small_model_listing_hides_the_axis_questions():
    from memprobe.spec.taxonomy import load_pool
    from tests.helpers.recording_llm import RecordingLLM

    pool = load_pool()
    shown = pool_candidates(pool, "skill_memory", 1, 4, persona().seed)
    pick = {"name": shown[0].name, "short": "fixes bikes", "explanation": "e"}
    counts = {c: int(c == "skill_memory") for c in CATEGORIES}
    for show_axes in (True, False):
        llm = RecordingLLM(lambda m, s: {"dims": [pick]})
        prompt = str(prompt_path("bank_select"))
        make_bank(persona(), counts, pool, GUIDES, llm, prompt, 4, False, show_axes)
        assert (shown[0].axis in llm.prompt_text(0)) is show_axes


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


def test_paper_bank_prompt_asks_for_a_non_generic_stance_and_shows_earlier_explanations():
    from memprobe.spec.taxonomy import load_pool
    from tests.helpers.recording_llm import RecordingLLM

    cfg = load_config(merged("config/config.yaml", "config/paper.yaml"))
    pool = load_pool()

    def answer(messages, schema):
        enum = schema.model_json_schema()["$defs"]["BankDim"]["properties"]["name"]["enum"]
        return {"dims": [{"name": enum[0], "short": "fixes bikes", "explanation": "EXPL-1."}]}

    llm = RecordingLLM(answer)
    counts = {c: int(c in ("skill_memory", "knowledge_memory")) for c in CATEGORIES}
    make_bank(persona(), counts, pool, GUIDES, llm, stage_prompt(cfg, "bank_select"))
    first, second = llm.prompt_text(0), llm.prompt_text(1)
    assert "meaningful, non-generic stance" in first and "most people would not share" not in first
    assert "is as worth recording as what they do well" in first
    assert "EXPL-1." in second  # the earlier category with its explanation
    assert pool.categories["knowledge_memory"].dimensions[0].axis in second


# -- issue 43 item 3: the bank call's persona, the release's or ours ---------------------------
def rich_persona():
    return persona().model_copy(
        update={
            "values": "Cares about VALUES-SENTENCE.",
            "attitude": "Takes life one step at a time. DETAILS-SENTENCE follow here.",
            "coping": "COPING-SENTENCE.",
            "stories": ["STORY-ONE."],
            "interests": ["chess", "rowing"],
        }
    )


def test_the_release_persona_is_the_fields_its_bank_call_saw():
    from memprobe.protocol.persona import persona_block, release_persona_block

    p = rich_persona()
    ours, release = persona_block(p), release_persona_block(p)
    for text in (str(p.age), p.gender, p.location.city, p.occupation, "VALUES-SENTENCE",
                 "Takes life one step at a time.", "chess, rowing", "STORY-ONE."):  # fmt: skip
        assert text in release and text in ours, text
    for text in (p.name, p.age_group, f"values: {p.values_orientation}", "DETAILS-SENTENCE",
                 "COPING-SENTENCE"):  # fmt: skip
        assert text not in release and text in ours, text


@pytest.mark.parametrize(("fields", "release"), [(None, False), ("ours", False), ("release", True)])
def test_the_bank_job_shows_the_persona_its_config_picks(
    scripted, tmp_path, monkeypatch, fields, release
):
    firsts = {c: POOL.names(c)[:1] for c in CATEGORIES}
    rules = [[[f"POOL FOR {c}"], {"dims": [dim(n) for n in names]}] for c, names in firsts.items()]
    ep, seen = scripted({"generator": {"when": rules}})
    config = {"bank": {"persona": fields}} if fields else None
    job = ScriptJob(tmp_path, monkeypatch, "bank", ep.base_url, config=config, **SPENT)
    p = rich_persona()
    inputs = {
        "persona": p,
        "pool": str(ROOT / "config" / "dimension_pool.yaml"),
        "guides": str(ROOT / "prompts" / "category_guides.yaml"),
        "prompt": str(prompt_path("bank_select")),
        "shorten": str(prompt_path("bank_shorten")),
    }
    assert job.run(inputs, {"bank": "bank.json"}, USER) == 0
    asked = [user_text(b) for b in seen["generator"]]
    assert len(asked) == len(CATEGORIES) and all("STORY-ONE." in t for t in asked)
    assert all((p.name not in t and "COPING-SENTENCE" not in t) is release for t in asked)
