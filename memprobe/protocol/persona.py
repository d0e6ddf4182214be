"""Simulated users, first stage: a seeded persona (paper §3.2; rule ``persona``).

Attributes (age, occupation, place, values) are drawn from the run's seed and the user id; the
generator writes the narrative around them. ``persona_block`` is how later stages show it;
``release_persona_block`` shows only the fields the release's bank call saw.
"""

from __future__ import annotations

import hashlib
import re
from typing import Annotated, Any

from pydantic import BaseModel, Field, create_model

from memprobe.llm.client import LLM
from memprobe.llm.salvage import Exhausted, cut_at_sentence, first_sentence, last_lenient, objects
from memprobe.spec.prompts import render
from memprobe.spec.records import Location, Persona, StandIn

VALUES = ("positive", "negative", "neutral")


def user_seed(seed: int, user_id: str) -> int:
    """A per-user seed that depends only on the run seed and the user id."""
    digest = hashlib.sha256(f"{seed}:{user_id}".encode()).hexdigest()
    return int(digest[:8], 16)


def age_group(age: int) -> str:
    for bound, name in ((13, "child"), (18, "adolescent"), (26, "young_adult"), (45, "adult")):
        if age < bound:
            return name
    return "middle_aged" if age < 65 else "senior"


# -- persona -----------------------------------------------------------------------------
RETIREMENT_AGE = 66  # 66 and older are retired; the release samples occupations for 18-65
MAX_STORY_CHARS = 1200  # the release's stories run to several sentences each


def _us_places() -> list[str]:
    """Real US place names from Faker's geo data (Faker's ``city()`` invents names)."""
    from faker.providers.geo import Provider as Geo

    return sorted({c[2] for c in Geo.land_coords if c[3] == "US"})


# Entries of Faker's en_US job list that are cut-off fragments, not occupations.
_BROKEN_JOBS = frozenset({"Copy", "Land", "Make", "Sub"})
_SENIOR_TITLE = re.compile(r"\b(chief|director|head|senior|principal|lead|partner)\b", re.I)


def occupation_for_age(age: int, fake) -> str:
    """An occupation that fits the age: pupils, students, workers, retirees."""
    rng = fake.random
    if age <= 10:
        return "elementary school student"
    if age <= 13:
        return "middle school student"
    if age <= 17:
        return "high school student"
    if age <= 22 and rng.random() < 0.5:
        return "university student"
    job = fake.job()
    # Redraw truncated Faker entries, and senior titles for young workers (bounded).
    for _ in range(20):
        young_senior = age < 30 and _SENIOR_TITLE.search(job)
        if job not in _BROKEN_JOBS and not young_senior:
            break
        job = fake.job()
    job = _plain_title(job)
    if age >= RETIREMENT_AGE:
        return f"retired {job[0].lower()}{job[1:]}"
    return job


def _plain_title(job: str) -> str:
    """Faker lists some jobs as "Engineer, civil"; say "Civil engineer" like a person would."""
    job = re.sub(r"\s*\([^)]*\)", "", job)  # "(England and Wales)", "(IT)": noise in a persona
    head, sep, rest = job.partition(", ")
    if not sep:
        return job
    title = f"{rest} {head.lower()}"
    return title[0].upper() + title[1:]


def life_stage(age: int, occupation: str) -> str:
    """A one-line reminder for the narrative model of what this age allows."""
    if age < 13:
        return "a child: life is school, family, friends and hobbies; no job, partner or children"
    if age < 18:
        return "a teenager in school: no career, spouse or children of their own"
    if occupation == "university student":
        return "a young adult at university, early in life"
    if age >= RETIREMENT_AGE:
        return "retired from paid work; stories can span a whole working life"
    return f"working as {occupation}"


def sample_attributes(seed: int, user_id: str) -> dict:
    """Seeded attributes: the same (seed, user_id) always gives the same person."""
    from faker import Faker

    useed = user_seed(seed, user_id)
    fake = Faker("en_US")
    fake.seed_instance(useed)  # per-instance: other users and threads cannot shift this draw
    rng = fake.random
    age = rng.randint(7, 85)
    gender = rng.choice(("female", "male"))
    first = fake.first_name_female() if gender == "female" else fake.first_name_male()
    occupation = occupation_for_age(age, fake)
    return {
        "user_id": user_id,
        "seed": useed,
        "name": f"{first} {fake.last_name()}",
        "age": age,
        "age_group": age_group(age),
        "gender": gender,
        "location": Location(country="United States", city=rng.choice(_us_places())),
        "occupation": occupation,
        "values_orientation": rng.choice(VALUES),
        "n_stories": rng.randint(1, 3),
    }


NARRATIVE_CHARS = {"values": 400, "attitude": 900, "coping": 400}  # each field's limit
MAX_INTEREST_CHARS = 60
MAX_INTERESTS = 6


def narrative_schema(n_stories: int) -> type[BaseModel]:
    """The narrative reply; the story count is the sampled one, so the schema fixes it."""
    story = Annotated[str, Field(min_length=20, max_length=MAX_STORY_CHARS)]
    interest = Annotated[str, Field(min_length=2, max_length=MAX_INTEREST_CHARS)]
    return create_model(
        "PersonaNarrative",
        values=(str, Field(min_length=20, max_length=NARRATIVE_CHARS["values"])),
        attitude=(str, Field(min_length=20, max_length=NARRATIVE_CHARS["attitude"])),
        coping=(str, Field(min_length=10, max_length=NARRATIVE_CHARS["coping"])),
        stories=(list[story], Field(min_length=n_stories, max_length=n_stories)),
        interests=(list[interest], Field(min_length=2, max_length=MAX_INTERESTS)),
    )


def narrative_stand_in(spent: Exhausted, n_stories: int) -> tuple[dict[str, Any], StandIn]:
    """The narrative when the re-asks ran out: the latest reply with over-long texts cut at a
    sentence end; failing that, the latest JSON reply's usable fields, the rest left empty
    (a thinner person, never an invented one)."""
    fixed = last_lenient(spent.replies, narrative_schema(n_stories))
    if fixed is not None:
        value, cut = fixed
        return value.model_dump(), spent.stand_in("persona", f"cut {', '.join(cut)}")
    obj = next(objects(spent.replies), {})

    def texts(key: str, limit: int, most: int) -> list[str]:
        items = obj.get(key)
        items = items if isinstance(items, list) else []
        kept = [cut_at_sentence(i, limit) for i in items if isinstance(i, str) and i.strip()]
        return kept[:most]

    fields: dict[str, Any] = {
        key: cut_at_sentence(obj[key], limit) if isinstance(obj.get(key), str) else ""
        for key, limit in NARRATIVE_CHARS.items()
    }
    fields["stories"] = texts("stories", MAX_STORY_CHARS, n_stories)
    fields["interests"] = texts("interests", MAX_INTEREST_CHARS, MAX_INTERESTS)
    empty = [k for k, v in fields.items() if not v]
    action = "kept the usable narrative fields of the latest reply" + (
        f"; left empty: {', '.join(empty)}" if empty else ""
    )
    return fields, spent.stand_in("persona", action)


def make_persona(seed: int, user_id: str, llm: LLM, prompt: str) -> Persona:
    attrs = sample_attributes(seed, user_id)
    n_stories = attrs.pop("n_stories")
    messages = render(
        prompt,
        name=attrs["name"],
        age=attrs["age"],
        gender=attrs["gender"],
        city=attrs["location"].city,
        country=attrs["location"].country,
        occupation=attrs["occupation"],
        stage=life_stage(attrs["age"], attrs["occupation"]),
        values_orientation=attrs["values_orientation"],
        n_stories=n_stories,
    )
    schema = narrative_schema(n_stories)
    stand_ins: list[StandIn] = []

    def stand_in(spent: Exhausted) -> BaseModel:
        fields, note = narrative_stand_in(spent, n_stories)
        stand_ins.append(note)
        return schema.model_construct(**fields)  # a thinner narrative than the schema asks

    # A model built at run time (narrative_schema): its fields are known to pydantic only.
    story: Any = llm.json(messages, schema, where=f"user {user_id}, persona", stand_in=stand_in)
    return Persona(
        **attrs,
        values=story.values.strip(),
        coping=story.coping.strip(),
        attitude=story.attitude.strip(),
        stories=[s.strip() for s in story.stories],
        interests=[i.strip() for i in story.interests],
        recoveries=stand_ins,
    )


def persona_block(p: Persona, stories: bool = True) -> str:
    lines = [
        f"{p.name}, {p.age} ({p.age_group}), {p.gender}, {p.location.city}, {p.location.country}",
        f"occupation: {p.occupation}; values: {p.values_orientation}",
        *([f"what they value: {p.values}"] if p.values else []),
        f"attitude: {p.attitude}",
        *([f"coping: {p.coping}"] if p.coping else []),
        f"interests: {', '.join(p.interests)}",
    ]
    if stories:
        lines += [f"story {i}: {s}" for i, s in enumerate(p.stories, 1)]
    return "\n".join(lines)


def release_persona_block(p: Persona) -> str:
    """The persona as the release's bank call saw it: age, gender, place, occupation, the
    values sentence, the life attitude without its details, interests and stories; no name,
    age group, values type, attitude details or coping. Our narrative writes the outlook and
    how it shows in one ``attitude`` text, so its first sentence stands for the release's
    one-sentence attitude."""
    lines = [
        f"{p.age}, {p.gender}, {p.location.city}, {p.location.country}",
        f"occupation: {p.occupation}",
        *([f"what they value: {p.values}"] if p.values else []),
        f"attitude: {first_sentence(p.attitude)}",
        f"interests: {', '.join(p.interests)}",
    ]
    return "\n".join(lines + [f"story {i}: {s}" for i, s in enumerate(p.stories, 1)])
