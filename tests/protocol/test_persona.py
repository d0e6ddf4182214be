"""The persona stage (memprobe/protocol/persona.py): seeded attributes that fit together, a
narrative that follows them, and a job past its re-asks that keeps the usable fields."""

from __future__ import annotations

from memprobe.protocol.persona import (
    _BROKEN_JOBS,
    RETIREMENT_AGE,
    age_group,
    life_stage,
    make_persona,
    sample_attributes,
)
from memprobe.spec import records
from memprobe.spec.prompts import prompt_path
from memprobe.spec.records import (
    Persona,
)
from tests.helpers.jobs import ScriptJob
from tests.helpers.protocol import SPENT, USER, stage_clients

# -- jobs whose replies never validate: each stage's stand-in, recorded --------------------
# max_reasks 1, resample_invalid 0: a reply and one re-ask, then the stage's stand-in.


def test_different_seed_changes_the_attributes():
    a, b = sample_attributes(11, "user_001"), sample_attributes(12, "user_001")
    keys = ("name", "age", "gender", "location", "occupation")
    assert [a[k] for k in keys] != [b[k] for k in keys]
    # ...and users of one run differ from each other.
    assert sample_attributes(11, "user_002")["seed"] != a["seed"]


def test_occupations_fit_the_age():
    people = [sample_attributes(0, f"user_{i:03d}") for i in range(1, 301)]
    ages = {p["age"] for p in people}
    assert min(ages) < 13 and max(ages) >= 66  # the sample covers children and retirees
    for p in people:
        age, job = p["age"], p["occupation"]
        if age < 18:
            assert job.endswith("school student"), (age, job)
        elif age >= RETIREMENT_AGE:
            assert job.startswith("retired "), (age, job)
        else:
            assert not job.startswith("retired ") and "school student" not in job, (age, job)
        assert job not in _BROKEN_JOBS and "," not in job
        assert p["age_group"] == age_group(age)
        assert 1 <= p["n_stories"] <= 3


def test_persona_narrative_follows_the_attributes(scripted, tmp_path):
    attrs = sample_attributes(5, "user_009")
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
    llm = stage_clients(ep.base_url, tmp_path, max_reasks=1)["generator"]
    p = make_persona(5, "user_009", llm, str(prompt_path("persona_narrative")))
    sent = seen["generator"]
    assert len(p.stories) == n and len(sent) == 2  # the wrong story count was re-asked
    prompt_text = sent[0]["messages"][-1]["content"]
    for value in (p.name, str(p.age), p.location.city, p.occupation, p.values_orientation):
        assert value in prompt_text
    assert life_stage(p.age, p.occupation) in prompt_text
    props = sent[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert props["stories"]["minItems"] == props["stories"]["maxItems"] == n
    # bounded fields, sized like the release's profiles (~2.9k characters in all)
    assert props["attitude"]["maxLength"] <= 900 and props["values"]["maxLength"] <= 400


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
