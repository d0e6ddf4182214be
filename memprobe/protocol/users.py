"""Simulated users: seeded personas, taxonomy-anchored hidden banks, leak-controlled tasks."""

from __future__ import annotations

import hashlib
import logging
import random
import re
from collections.abc import Callable
from types import GenericAlias
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema, create_model

from memprobe.llm.client import LLM, Exhausted
from memprobe.llm.salvage import (
    cut_at_sentence,
    cut_words,
    json_value,
    last_lenient,
    longest_text,
    objects,
    strip_fence,
)
from memprobe.spec.prompts import PROMPT_DIR, prompt_path, render
from memprobe.spec.records import (
    Bank,
    BankEntry,
    CriticVerdict,
    LeakReport,
    Location,
    Persona,
    RecordError,
    Recovery,
    Task,
    Tasks,
)
from memprobe.spec.taxonomy import Dimension, Pool, check_counts, load_guides
from memprobe.vocabulary import CATEGORIES, Stage

log = logging.getLogger("memprobe")

HINTS_FILE = PROMPT_DIR / "elicitation_hints.yaml"  # per category, same keys as the guides
MAX_SHORT_WORDS = 15
MAX_SHORT_CHARS = 75
MAX_EXPLANATION_CHARS = 800
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


def narrative_stand_in(spent: Exhausted, n_stories: int) -> tuple[dict[str, Any], Recovery]:
    """The narrative when the re-asks ran out: the latest reply with over-long texts cut at a
    sentence end; failing that, the latest JSON reply's usable fields, the rest left empty
    (a thinner person, never an invented one)."""
    fixed = last_lenient(spent.replies, narrative_schema(n_stories))
    if fixed is not None:
        value, cut = fixed
        return value.model_dump(), spent.recovery("persona", f"cut {', '.join(cut)}")
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
    return fields, spent.recovery("persona", action)


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
    recoveries: list[Recovery] = []

    def stand_in(spent: Exhausted) -> BaseModel:
        fields, recovery = narrative_stand_in(spent, n_stories)
        recoveries.append(recovery)
        return schema.model_construct(**fields)  # a thinner narrative than the schema asks

    # A model built at run time (narrative_schema): its fields are known to pydantic only.
    story: Any = llm.json(messages, schema, where=f"user {user_id}, persona", recover=stand_in)
    return Persona(
        **attrs,
        values=story.values.strip(),
        coping=story.coping.strip(),
        attitude=story.attitude.strip(),
        stories=[s.strip() for s in story.stories],
        interests=[i.strip() for i in story.interests],
        recoveries=recoveries,
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


# -- bank --------------------------------------------------------------------------------
def bank_schema(names: list[str], n: int) -> type[BaseModel]:
    """The bank reply: the request's schema carries the pool names as an enum and exactly n
    items (for endpoints that constrain decoding), but parsing accepts any string and any
    count so that :func:`check_bank_dims` can name the problem when an endpoint ignores it."""
    name = Annotated[str, WithJsonSchema({"type": "string", "enum": list(names)})]
    # ~15 words: a grammar-constrained endpoint then cannot produce an over-long short.
    short = Annotated[str, WithJsonSchema({"type": "string", "maxLength": MAX_SHORT_CHARS})]
    entry = create_model(
        "BankDim",
        name=(name, ...),
        short=(short, ...),
        explanation=(str, Field(min_length=1, max_length=MAX_EXPLANATION_CHARS)),
    )
    dims: Any = GenericAlias(list, entry)  # list[entry], of a model built at run time
    return create_model(
        "BankReply",
        dims=(dims, Field(json_schema_extra={"minItems": n, "maxItems": n})),
    )


def pool_candidates(
    pool: Pool, category: str, n: int, sample: int | None, seed: int
) -> list[Dimension]:
    """The pool entries shown for one category: all of them, or a seeded sample of at least n."""
    dims = list(pool.categories[category].dimensions)
    if sample is None or sample >= len(dims):
        return dims
    rng = random.Random(f"{seed}:{category}")
    return rng.sample(dims, max(sample, n))


def repeats_axis(short: str, axis: str) -> bool:
    """A value that restates the pool's axis question instead of answering it."""
    words = content_words(short)
    return bool(words) and len(words & content_words(axis)) / len(words) >= 0.8


def short_problem(short: str, axis: str | None) -> str | None:
    """What is wrong with a bank short as a value (too many words, the axis restated)."""
    words = len(short.split())
    if not 1 <= words <= MAX_SHORT_WORDS:
        return f"short has {words} words, expected 1-{MAX_SHORT_WORDS}"
    if axis and repeats_axis(short, axis):
        return "short repeats the axis question; give this person's value"
    return None


def check_bank_dims(
    dims: list[dict],
    names: list[str],
    n: int,
    category: str,
    axes: dict[str, str] | None = None,
) -> None:
    """Raise ValueError listing every problem: count, unknown name, duplicate, long short,
    a short that repeats the dimension's axis question."""
    problems: list[str] = []
    if len(dims) != n:
        problems.append(f"expected exactly {n} dims, got {len(dims)}")
    seen: set[str] = set()
    for i, d in enumerate(dims):
        name = d["name"]
        if name not in names:
            problems.append(f"dims[{i}]: {name!r} is not a {category} dimension of the pool")
        elif name in seen:
            problems.append(f"dims[{i}]: duplicate dimension {name!r}")
        seen.add(name)
        problem = short_problem(d["short"], (axes or {}).get(name))
        if problem:
            problems.append(f"dims[{i}] ({name}): {problem}")
        if not d["explanation"].strip():
            problems.append(f"dims[{i}] ({name}): empty explanation")
    if problems:
        raise ValueError(f"bank {category}: " + "; ".join(problems))


class ShortReply(BaseModel):
    # A grammar-constrained endpoint cannot write more than ~12 words in 60 characters.
    short: Annotated[str, WithJsonSchema({"type": "string", "maxLength": 60})]


def reply_dims(replies: list[str]) -> list[list[dict[str, str]]]:
    """Each JSON reply's well-formed dims (name, short, explanation: strings), latest first."""
    keys = ("name", "short", "explanation")
    out = []
    for obj in objects(replies):
        dims = obj.get("dims")
        items = dims if isinstance(dims, list) else []
        well_formed = [
            d for d in items if isinstance(d, dict) and all(isinstance(d.get(k), str) for k in keys)
        ]
        out.append(
            [
                {
                    "name": d["name"].strip(),
                    "short": d["short"].strip(),
                    "explanation": cut_at_sentence(d["explanation"], MAX_EXPLANATION_CHARS),
                }
                for d in well_formed
            ]
        )
    return out


def bank_stand_in(
    spent: Exhausted,
    n: int,
    shown: list[Dimension],
    shorten: Callable[[dict[str, str]], tuple[str, str]],
) -> tuple[list[dict[str, str]], Recovery]:
    """n entries when the re-asks ran out. The latest reply's entries with a pool name come
    first (a short with a problem rewritten by ``shorten``: a dedicated call, else cut to 15
    words; an empty explanation replaced by the axis question it answers); missing ones are
    replaced by other dimensions of the category: a valid entry of an earlier reply, else the
    pool's first example value for a shown dimension."""
    axes = {d.name: d.axis for d in shown}
    replies = reply_dims(spent.replies)
    chosen: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    for d in replies[0] if replies else []:  # a pick without a value is a missing one
        if d["name"] in axes and d["name"] not in chosen and d["short"] and len(chosen) < n:
            chosen[d["name"]] = dict(d)
    for name, d in chosen.items():
        if short_problem(d["short"], axes[name]):
            d["short"], how = shorten(d)
            notes.append(f"{name}: short {how}")
        if not d["explanation"]:
            d["explanation"] = axes[name]
            notes.append(f"{name}: empty explanation replaced by the axis question")
    earlier = [d for dims in replies[1:] for d in dims]
    for d in earlier:
        name = d["name"]
        usable = d["explanation"] and not short_problem(d["short"], axes.get(name))
        if len(chosen) < n and name in axes and name not in chosen and usable:
            chosen[name] = d
            notes.append(f"{name}: taken from an earlier reply in place of a missing dimension")
    for dim in shown:
        if len(chosen) < n and dim.name not in chosen:
            chosen[dim.name] = {
                "name": dim.name,
                "short": dim.answer_space[0],
                "explanation": dim.axis,
            }
            notes.append(f"{dim.name}: the pool's first example value in place of a missing one")
    return list(chosen.values()), spent.recovery("bank", "; ".join(notes) or "kept as given")


def shorten_short(
    d: dict[str, str], axis: str, llm: LLM, prompt: str, where: str
) -> tuple[str, str]:
    """A bank short rewritten to at most 15 words by a dedicated call; when its own re-asks
    run out, the short cut to 15 words at a clause boundary. Returns the short and how."""
    how = "shortened by a dedicated call"

    def check(r: ShortReply) -> None:
        problem = short_problem(r.short, axis)
        if problem:
            raise ValueError(problem)

    def cut(spent: Exhausted) -> ShortReply:
        nonlocal how
        how = "cut to 15 words (the shortening call's re-asks ran out too)"
        return ShortReply(short=cut_words(d["short"], MAX_SHORT_WORDS))

    reply = llm.json(
        render(
            prompt,
            dimension=d["name"],
            axis=axis,
            short=d["short"],
            explanation=d["explanation"] or "(none)",
            max_words=MAX_SHORT_WORDS,
        ),
        ShortReply,
        check=check,
        where=f"{where}, shorten {d['name']}",
        recover=cut,
    )
    return reply.short.strip(), how


def make_bank(
    persona: Persona,
    counts: dict[str, int],
    pool: Pool,
    guides: dict[str, str],
    llm: LLM,
    prompt: str,
    pool_sample: int | None = None,
    show_examples: bool = True,
    show_axes: bool = True,
    shorten_prompt: str | None = None,
) -> Bank:
    entries: list[BankEntry] = []
    recoveries: list[Recovery] = []
    shorten_prompt = shorten_prompt or str(prompt_path("bank_shorten"))
    for cat in CATEGORIES:
        n = counts[cat]
        if n == 0:
            continue
        check_counts(pool, {cat: n})
        shown = pool_candidates(pool, cat, n, pool_sample, persona.seed)
        pool_text = "\n".join(
            f"- {d.name}"
            + (f": {d.axis}" if show_axes else "")
            + (f"  [e.g. {' / '.join(d.answer_space)}]" if show_examples else "")
            for d in shown
        )
        # Earlier categories: labels only ($earlier), or with explanations ($earlier_full, as
        # the release showed them); the prompt file picks (prompts.bank_select).
        earlier = "\n".join(f"[{e.category}] {e.dimension}: {e.short}" for e in entries)
        messages = render(
            prompt,
            n=n,
            category=cat,
            guide=guides[cat],
            persona=persona_block(persona),
            earlier=earlier or "(none yet)",
            earlier_full=bank_block(Bank(user_id=persona.user_id, entries=entries)) or "(none yet)",
            pool=pool_text,
        )
        where = f"user {persona.user_id}, bank {cat}"
        dims = category_dims(messages, cat, n, shown, llm, shorten_prompt, where, recoveries)
        entries += [
            BankEntry(
                category=cat,
                dimension=d["name"],
                short=d["short"].strip(),
                explanation=d["explanation"].strip(),
            )
            for d in dims
        ]
    return Bank(user_id=persona.user_id, entries=entries, recoveries=recoveries)


def category_dims(
    messages: list[dict[str, str]],
    cat: str,
    n: int,
    shown: list[Dimension],
    llm: LLM,
    shorten_prompt: str,
    where: str,
    recoveries: list[Recovery],
) -> list[dict[str, str]]:
    """One category's n picks (a recovery, when one was needed, goes to ``recoveries``)."""
    names = [d.name for d in shown]
    axes = {d.name: d.axis for d in shown}
    schema = bank_schema(names, n)

    def check(r: Any) -> None:
        check_bank_dims([d.model_dump() for d in r.dims], names, n, cat, axes)

    def shorten(d: dict[str, str]) -> tuple[str, str]:
        return shorten_short(d, axes[d["name"]], llm, shorten_prompt, where)

    def stand_in(spent: Exhausted) -> Any:
        dims, recovery = bank_stand_in(spent, n, shown, shorten)
        recoveries.append(recovery)
        return schema.model_validate({"dims": dims})

    # bank_schema's model is built at run time: its fields are known to pydantic only.
    reply: Any = llm.json(messages, schema, check=check, where=where, recover=stand_in)
    return [d.model_dump() for d in reply.dims]


# -- tasks -------------------------------------------------------------------------------
MAX_TASK_CHARS = 600


class TaskDraft(BaseModel):
    task: str = Field(min_length=1, max_length=MAX_TASK_CHARS)
    rationale: str = Field(default="", max_length=300)


class CriticReply(BaseModel):
    inferred_trait: str = Field(max_length=150)
    verdict: Literal["neutral", "fishing"]
    why: str = Field(default="", max_length=300)


GENERIC_TASK = "Could you help me think something through?"


def draft_stand_in(spent: Exhausted, stage: Stage) -> tuple[TaskDraft | None, Recovery]:
    """A writer's or editor's draft when the re-asks ran out: the latest reply with over-long
    fields cut at a sentence end, else the latest reply's text as the request (a model that
    answered in prose, or nested its answer); None when no reply holds any text."""
    fixed = last_lenient(spent.replies, TaskDraft)
    if fixed is not None:
        value, cut = fixed
        return value, spent.recovery(stage, f"cut {', '.join(cut)}")
    parsed = json_value(spent.last)
    text = longest_text(parsed) if parsed is not None else strip_fence(spent.last)
    text = cut_at_sentence(text, MAX_TASK_CHARS)
    if text:
        return TaskDraft(task=text), spent.recovery(stage, "the latest reply's text as the task")
    return None, spent.recovery(stage, "no usable text")


def critic_stand_in(
    spent: Exhausted, task: str, short: str, threshold: float
) -> tuple[CriticReply, Recovery]:
    """The critic's verdict when the re-asks ran out: the latest reply with over-long fields
    cut, else the deterministic leak check's (fishing over ``tasks.leak_threshold``)."""
    fixed = last_lenient(spent.replies, CriticReply)
    if fixed is not None:
        value, cut = fixed
        return value, spent.recovery("critic", f"cut {', '.join(cut)}")
    share = leak_share(task, short)
    verdict: Literal["neutral", "fishing"] = "fishing" if share > threshold else "neutral"
    why = f"stand-in: {share:.2f} of the target's content words are in the request"
    action = f"verdict {verdict} from the leak check ({share:.2f}, threshold {threshold:g})"
    return CriticReply(inferred_trait="", verdict=verdict, why=why), spent.recovery(
        "critic", action
    )


_STOP = set(
    "a an the and or but of to in on at for with by from as is are was were be been being it its "
    "this that these those they them their he she his her i me my you your we our not no very "
    "more most less than then so too can could would should will just only about into over "
    "under when while who whom which what how why all any some each both few many much own same "
    "other such has have had do does did doing prefers prefer likes like user every also often "
    "always usually rather quite".split()
)


def _stem(word: str) -> str:
    """A crude suffix strip so that "budgets"/"budgeting" count as "budget"."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> set[str]:
    words = re.findall(r"[a-z][a-z'-]+", text.lower())
    return {_stem(w.strip("'-")) for w in words if len(w) > 2 and w not in _STOP}


def leak_share(task: str, short: str) -> float:
    """Share of the target's content words that also appear in its task (0 = no echo)."""
    target = content_words(short)
    if not target:
        return 0.0
    return round(len(target & content_words(task)) / len(target), 4)


def leak_report(tasks: list[Task], threshold: float) -> LeakReport:
    shares = [t.leak_share for t in tasks]
    return LeakReport(
        threshold=threshold,
        mean_share=round(sum(shares) / len(shares), 4) if shares else 0.0,
        max_share=max(shares, default=0.0),
        flagged=[t.index for t in tasks if t.leak_share > threshold],
        edited=sum(1 for t in tasks if t.revisions),
        budget_spent=sum(1 for t in tasks if t.status == "fishing_budget_spent"),
    )


def earlier_block(tasks: list[Task]) -> str:
    """The tasks written so far with their targets, so the writer varies the scenes."""
    lines = [f"- {t.target_category}/{t.target_dimension}: {t.task}" for t in tasks]
    return "\n".join(lines) or "(none yet)"


def make_task(
    index: int,
    entry: BankEntry,
    persona: Persona,
    earlier: list[Task],
    guides: dict[str, str],
    llms: dict[str, LLM],
    prompts: dict[str, str],
    max_edits: int,
    leak_threshold: float,
    hints: dict[str, str],
    recoveries: list[Recovery] | None = None,
) -> Task:
    """Write one task, then criticise and edit it until neutral or ``max_edits`` is spent.

    ``verdicts[i]`` judges version i; ``revisions`` holds every replaced version in order, so
    the final ``task`` is version ``len(revisions)``. The release edited once without a new
    critique; the paper (App. D) asks for the loop, which we keep. A reply whose re-asks ran
    out is recovered (``draft_stand_in``, ``critic_stand_in``) and listed in ``recoveries``;
    an edit that cannot be recovered keeps the version it was asked to edit and ends the loop.
    """
    recovered = recoveries if recoveries is not None else []
    edit_failed = False

    def write_stand_in(spent: Exhausted) -> TaskDraft:
        draft, recovery = draft_stand_in(spent, "task_writer")
        if draft is None:
            draft = TaskDraft(task=GENERIC_TASK)
            recovery.action = "a generic opening request (no reply held any text)"
        recovered.append(recovery)
        return draft

    def edit_stand_in(spent: Exhausted) -> TaskDraft:
        nonlocal edit_failed
        draft, recovery = draft_stand_in(spent, "editor")
        if draft is None:
            edit_failed = True
            draft = TaskDraft(task=text, rationale=rationale)
            recovery.action = "kept the unedited request and stopped editing (no usable text)"
        recovered.append(recovery)
        return draft

    def critic_recover(spent: Exhausted) -> CriticReply:
        reply, recovery = critic_stand_in(spent, text, entry.short, leak_threshold)
        recovered.append(recovery)
        return reply

    where = f"user {persona.user_id}, task {index} ({entry.dimension})"
    target = {
        "category": entry.category,
        "dimension": entry.dimension,
        "short": entry.short,
        "explanation": entry.explanation,
    }
    draft = llms["task_writer"].json(
        render(
            prompts["write"],
            persona=persona_block(persona, stories=False),
            earlier=earlier_block(earlier),
            guide=guides[entry.category],
            hint=hints[entry.category],
            **target,
        ),
        TaskDraft,
        where=where,
        recover=write_stand_in,
    )
    text, rationale = draft.task.strip(), draft.rationale.strip()
    verdicts: list[CriticVerdict] = []
    revisions: list[str] = []
    status: Literal["neutral", "fishing_budget_spent"] = "neutral"
    while True:
        # The critic is blind: it sees the category and the request, never the target.
        crit = llms["critic"].json(
            render(prompts["critic"], category=entry.category, task=text),
            CriticReply,
            where=f"{where}, critic round {len(verdicts) + 1}",
            recover=critic_recover,
        )
        verdicts.append(
            CriticVerdict(verdict=crit.verdict, inferred_trait=crit.inferred_trait, why=crit.why)
        )
        if crit.verdict == "neutral":
            break
        if len(revisions) >= max_edits:
            status = "fishing_budget_spent"
            log.warning("%s: still fishing after %d edit(s); marked", where, max_edits)
            break
        # The prompt file picks its inputs (prompts.task_edit): the release's editor read the
        # compact profile, the earlier tasks and the category guide; ours reads the stories.
        edit = llms["editor"].json(
            render(
                prompts["edit"],
                persona=persona_block(persona),
                persona_compact=persona_block(persona, stories=False),
                earlier=earlier_block(earlier),
                guide=guides[entry.category],
                **target,
                task=text,
                inferred_trait=crit.inferred_trait,
                why=crit.why,
            ),
            TaskDraft,
            where=f"{where}, edit {len(revisions) + 1}",
            recover=edit_stand_in,
        )
        if edit_failed:
            status = "fishing_budget_spent"
            break
        revisions.append(text)
        text, rationale = edit.task.strip(), edit.rationale.strip()
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
    hints: dict[str, str] | None = None,
) -> Tasks:
    """One task per bank entry, in bank order (sequential: each sees the earlier scenes)."""
    hints = hints if hints is not None else load_guides(HINTS_FILE)
    tasks: list[Task] = []
    recoveries: list[Recovery] = []
    for i, entry in enumerate(bank.entries, start=1):
        tasks.append(
            make_task(
                i,
                entry,
                persona,
                tasks,
                guides,
                llms,
                prompts,
                max_edits,
                leak_threshold,
                hints,
                recoveries,
            )
        )
        log.info("tasks %s: %d/%d done", persona.user_id, i, len(bank.entries))
    report = leak_report(tasks, leak_threshold)
    log.info(
        "tasks %s: leak mean %.2f max %.2f, %d flagged over %.2f, %d edited, %d budget spent",
        persona.user_id,
        report.mean_share,
        report.max_share,
        len(report.flagged),
        leak_threshold,
        report.edited,
        report.budget_spent,
    )
    return Tasks(user_id=persona.user_id, tasks=tasks, leak=report, recoveries=recoveries)


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


def bank_block(bank: Bank) -> str:
    return "\n".join(
        f"[{e.category}] {e.dimension}: {e.short} ({e.explanation})" for e in bank.entries
    )
