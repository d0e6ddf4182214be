"""Simulated users, second stage: the hidden bank of targets (paper §3.2; rule ``bank``).

Per category, the generator picks dimensions from the pool (shown whole or sampled, with or
without axes and example values) and fills each with this person's value (a short phrase)
and an explanation; a short that is too long or restates the axis is re-asked, then
shortened by a dedicated call. ``bank_block`` is how later stages show the bank.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import GenericAlias
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, WithJsonSchema, create_model

from memprobe.llm.client import LLM
from memprobe.llm.salvage import Exhausted, cut_at_sentence, cut_words, objects
from memprobe.protocol.leaks import content_words
from memprobe.protocol.persona import persona_block, release_persona_block
from memprobe.spec.prompts import prompt_path, render
from memprobe.spec.records import Bank, BankEntry, Persona, StandIn
from memprobe.spec.taxonomy import Dimension, Pool, check_counts
from memprobe.vocabulary import CATEGORIES

MAX_SHORT_WORDS = 15
MAX_SHORT_CHARS = 75
MAX_EXPLANATION_CHARS = 800


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
) -> tuple[list[dict[str, str]], StandIn]:
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
    return list(chosen.values()), spent.stand_in("bank", "; ".join(notes) or "kept as given")


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
        stand_in=cut,
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
    persona_fields: Literal["release", "ours"] = "ours",
) -> Bank:
    """The bank, one call per category; ``persona_fields`` picks the persona it is shown (the
    release's fields, or our whole persona block)."""
    shown_persona = (
        release_persona_block(persona) if persona_fields == "release" else persona_block(persona)
    )
    entries: list[BankEntry] = []
    stand_ins: list[StandIn] = []
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
            persona=shown_persona,
            earlier=earlier or "(none yet)",
            earlier_full=bank_block(Bank(user_id=persona.user_id, entries=entries)) or "(none yet)",
            pool=pool_text,
        )
        where = f"user {persona.user_id}, bank {cat}"
        dims = category_dims(messages, cat, n, shown, llm, shorten_prompt, where, stand_ins)
        entries += [
            BankEntry(
                category=cat,
                dimension=d["name"],
                short=d["short"].strip(),
                explanation=d["explanation"].strip(),
            )
            for d in dims
        ]
    return Bank(user_id=persona.user_id, entries=entries, recoveries=stand_ins)


def category_dims(
    messages: list[dict[str, str]],
    cat: str,
    n: int,
    shown: list[Dimension],
    llm: LLM,
    shorten_prompt: str,
    where: str,
    stand_ins: list[StandIn],
) -> list[dict[str, str]]:
    """One category's n picks (a stand-in, when one was needed, goes to ``stand_ins``)."""
    names = [d.name for d in shown]
    axes = {d.name: d.axis for d in shown}
    schema = bank_schema(names, n)

    def check(r: Any) -> None:
        check_bank_dims([d.model_dump() for d in r.dims], names, n, cat, axes)

    def shorten(d: dict[str, str]) -> tuple[str, str]:
        return shorten_short(d, axes[d["name"]], llm, shorten_prompt, where)

    def stand_in(spent: Exhausted) -> Any:
        dims, note = bank_stand_in(spent, n, shown, shorten)
        stand_ins.append(note)
        return schema.model_validate({"dims": dims})

    # bank_schema's model is built at run time: its fields are known to pydantic only.
    reply: Any = llm.json(messages, schema, check=check, where=where, stand_in=stand_in)
    return [d.model_dump() for d in reply.dims]


def bank_block(bank: Bank) -> str:
    return "\n".join(
        f"[{e.category}] {e.dimension}: {e.short} ({e.explanation})" for e in bank.entries
    )
