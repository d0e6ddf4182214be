"""Simulated users: seeded personas, taxonomy-anchored hidden banks, leak-controlled tasks."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from typing import Literal

from pydantic import BaseModel, Field, create_model

from memprobe import CATEGORIES
from memprobe.llm import LLM
from memprobe.prompts import render
from memprobe.records import (
    Bank,
    BankEntry,
    CriticVerdict,
    Location,
    Persona,
    RecordError,
    Task,
    Tasks,
)
from memprobe.taxonomy import Pool

log = logging.getLogger("memprobe")

MAX_SHORT_WORDS = 15
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
class PersonaNarrative(BaseModel):
    attitude: str = Field(max_length=600)
    stories: list[str] = Field(min_length=1, max_length=3)
    interests: list[str] = Field(min_length=1, max_length=6)


def sample_attributes(seed: int, user_id: str) -> dict:
    """Seeded demographic attributes (Faker for names, places and jobs)."""
    from faker import Faker

    useed = user_seed(seed, user_id)
    fake = Faker("en_US")
    fake.seed_instance(useed)
    rng = fake.random
    age = rng.randint(7, 85)
    gender = rng.choice(("female", "male"))
    name = fake.name_female() if gender == "female" else fake.name_male()
    if age < 18:
        occupation = "student"
    elif age <= 65:
        occupation = fake.job()
    else:
        occupation = f"retired {fake.job().lower()}"
    return {
        "user_id": user_id,
        "seed": useed,
        "name": name,
        "age": age,
        "age_group": age_group(age),
        "gender": gender,
        "location": Location(country="United States", city=fake.city()),
        "occupation": occupation,
        "values_orientation": rng.choice(VALUES),
        "n_stories": rng.randint(1, 3),
    }


def make_persona(seed: int, user_id: str, llm: LLM, prompt: str) -> Persona:
    attrs = sample_attributes(seed, user_id)
    n_stories = attrs.pop("n_stories")
    messages = render(
        prompt,
        name=attrs["name"],
        age=attrs["age"],
        age_group=attrs["age_group"],
        gender=attrs["gender"],
        city=attrs["location"].city,
        country=attrs["location"].country,
        occupation=attrs["occupation"],
        values_orientation=attrs["values_orientation"],
        n_stories=n_stories,
    )
    story = llm.json(messages, PersonaNarrative, where=f"user {user_id}, persona")
    return Persona(
        **attrs, attitude=story.attitude, stories=story.stories, interests=story.interests
    )


def persona_block(p: Persona, stories: bool = True) -> str:
    lines = [
        f"{p.name}, {p.age} ({p.age_group}), {p.gender}, {p.location.city}, {p.location.country}",
        f"occupation: {p.occupation}; values: {p.values_orientation}",
        f"attitude: {p.attitude}",
        f"interests: {', '.join(p.interests)}",
    ]
    if stories:
        lines += [f"story {i}: {s}" for i, s in enumerate(p.stories, 1)]
    return "\n".join(lines)


# -- bank --------------------------------------------------------------------------------
def bank_schema(names: list[str], n: int) -> type[BaseModel]:
    """A reply schema whose names are the pool's (an enum) and whose length is exactly n."""
    name_type = Literal[tuple(names)]  # type: ignore[valid-type]
    entry = create_model(
        "BankDim",
        name=(name_type, ...),
        short=(str, Field(max_length=160)),
        explanation=(str, Field(min_length=1, max_length=1200)),
    )
    return create_model("BankReply", dims=(list[entry], Field(min_length=n, max_length=n)))


def check_bank_dims(dims: list[dict], names: list[str], n: int, category: str) -> None:
    """Raise ValueError naming the first problem: count, unknown name, duplicate, long short."""
    if len(dims) != n:
        raise ValueError(f"{category}: expected exactly {n} dims, got {len(dims)}")
    seen: set[str] = set()
    for i, d in enumerate(dims):
        if d["name"] not in names:
            raise ValueError(f"{category}[{i}]: {d['name']!r} is not a pool dimension")
        if d["name"] in seen:
            raise ValueError(f"{category}[{i}]: duplicate dimension {d['name']!r}")
        seen.add(d["name"])
        words = len(d["short"].split())
        if words > MAX_SHORT_WORDS or words == 0:
            raise ValueError(
                f"{category}[{i}] ({d['name']}): short has {words} words, "
                f"expected 1-{MAX_SHORT_WORDS}"
            )
        if not d["explanation"].strip():
            raise ValueError(f"{category}[{i}] ({d['name']}): empty explanation")


def make_bank(
    persona: Persona,
    counts: dict[str, int],
    pool: Pool,
    guides: dict[str, str],
    llm: LLM,
    prompt: str,
) -> Bank:
    entries: list[BankEntry] = []
    for cat in CATEGORIES:
        n = counts[cat]
        if n == 0:
            continue
        names = pool.names(cat)
        if n > len(names):
            raise ValueError(f"dims_per_category.{cat}: {n} requested, pool has {len(names)}")
        pool_text = "\n".join(
            f"- {d.name}: {d.axis}  [e.g. {' / '.join(d.answer_space)}]"
            for d in pool.categories[cat].dimensions
        )
        earlier = "\n".join(f"[{e.category}] {e.dimension}: {e.short}" for e in entries)
        messages = render(
            prompt,
            n=n,
            category=cat,
            guide=guides[cat],
            persona=persona_block(persona),
            earlier=earlier or "(none yet)",
            pool=pool_text,
        )
        schema = bank_schema(names, n)
        reply = llm.json(
            messages,
            schema,
            check=lambda r, names=names, n=n, cat=cat: check_bank_dims(
                [d.model_dump() for d in r.dims], names, n, cat
            ),
            where=f"user {persona.user_id}, bank {cat}",
        )
        entries += [
            BankEntry(
                category=cat,
                dimension=d.name,
                short=d.short.strip(),
                explanation=d.explanation.strip(),
            )
            for d in reply.dims
        ]
    return Bank(user_id=persona.user_id, entries=entries)


# -- tasks -------------------------------------------------------------------------------
class TaskDraft(BaseModel):
    task: str = Field(min_length=1, max_length=800)
    rationale: str = Field(default="", max_length=400)


class CriticReply(BaseModel):
    inferred_trait: str = Field(max_length=200)
    verdict: Literal["neutral", "fishing"]
    why: str = Field(default="", max_length=400)


_STOP = set(
    "a an the and or but of to in on at for with by from as is are was were be been being it its "
    "this that these those they them their he she his her i me my you your we our not no very "
    "more most less than then so too can could would should will just only about into over "
    "under when while who whom which what how why all any some each both few many much own same "
    "other such has have had do does did doing prefers prefer likes like user".split()
)


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z'-]+", text.lower()) if len(w) > 2 and w not in _STOP}


def leak_share(task: str, short: str) -> float:
    """Share of the target's content words that also appear in its task (0 = no echo)."""
    target = content_words(short)
    if not target:
        return 0.0
    return round(len(target & content_words(task)) / len(target), 4)


def make_task(
    index: int,
    entry: BankEntry,
    persona: Persona,
    earlier: list[str],
    guides: dict[str, str],
    llms: dict[str, LLM],
    prompts: dict[str, str],
    max_edits: int,
    leak_threshold: float,
) -> Task:
    where = f"user {persona.user_id}, task {index} ({entry.dimension})"
    draft = llms["generator"].json(
        render(
            prompts["write"],
            persona=persona_block(persona, stories=False),
            earlier="\n".join(f"- {t}" for t in earlier) or "(none yet)",
            category=entry.category,
            guide=guides[entry.category],
            dimension=entry.dimension,
            short=entry.short,
            explanation=entry.explanation,
        ),
        TaskDraft,
        where=where,
    )
    text, rationale = draft.task.strip(), draft.rationale
    verdicts: list[CriticVerdict] = []
    revisions: list[str] = []
    status = "neutral"
    while True:
        crit = llms["critic"].json(
            render(prompts["critic"], category=entry.category, task=text),
            CriticReply,
            where=where,
        )
        verdicts.append(
            CriticVerdict(verdict=crit.verdict, inferred_trait=crit.inferred_trait, why=crit.why)
        )
        if crit.verdict == "neutral":
            break
        if len(revisions) >= max_edits:
            status = "fishing_budget_spent"
            log.warning("%s: still fishing after %d edits; marked", where, max_edits)
            break
        edit = llms["editor"].json(
            render(prompts["edit"], task=text, inferred_trait=crit.inferred_trait, why=crit.why),
            TaskDraft,
            where=where,
        )
        revisions.append(text)
        text, rationale = edit.task.strip(), edit.rationale
    share = leak_share(text, entry.short)
    return Task(
        index=index,
        task=text,
        rationale=rationale,
        target_category=entry.category,
        target_dimension=entry.dimension,
        target_short=entry.short,
        verdicts=verdicts,
        revisions=revisions,
        status=status,
        leak_share=share,
        leak_flag=share > leak_threshold,
    )


def make_tasks(
    persona: Persona,
    bank: Bank,
    guides: dict[str, str],
    llms: dict[str, LLM],
    prompts: dict[str, str],
    max_edits: int = 3,
    leak_threshold: float = 0.5,
) -> Tasks:
    tasks: list[Task] = []
    for i, entry in enumerate(bank.entries, start=1):
        tasks.append(
            make_task(
                i,
                entry,
                persona,
                [t.task for t in tasks],
                guides,
                llms,
                prompts,
                max_edits,
                leak_threshold,
            )
        )
        log.info("tasks %s: %d/%d done", persona.user_id, i, len(bank.entries))
    return Tasks(user_id=persona.user_id, tasks=tasks)


def check_tasks_match_bank(tasks: Tasks, bank: Bank, source: str) -> None:
    """Tasks must follow the bank one to one, in bank order."""
    if len(tasks.tasks) != len(bank.entries):
        raise RecordError(
            f"{source}: {len(tasks.tasks)} tasks for {len(bank.entries)} bank entries"
        )
    for i, (t, e) in enumerate(zip(tasks.tasks, bank.entries, strict=True)):
        if t.target_dimension != e.dimension:
            raise RecordError(
                f"{source}: tasks[{i}].target_dimension is {t.target_dimension!r}, "
                f"bank order expects {e.dimension!r}"
            )


def dump_for_prompt(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=1)


def bank_block(bank: Bank) -> str:
    return "\n".join(
        f"[{e.category}] {e.dimension}: {e.short} ({e.explanation})" for e in bank.entries
    )
