"""Human audit of the LLM's labels: a stratified sample, a sheet page, and agreement with κ.

Two label types are audited (the paper's Appendix G checks the same two by hand):
- ``feedback``: the simulator's feedback type of one turn (given the reply it answered);
- ``attribution``: the attribution label of one missed target, where an LLM stage decided it
  (``ok`` and ``no_targeted_task`` follow from the score and the task list, not from a model).

``sample`` writes ``results/audit/NAME/``: ``items.json`` (the sample, with the LLM's labels)
and ``index.html`` (the sheet page). A person marks each item agree / disagree, with their own
label on a disagreement, and saves ``sheet.csv`` from the page into that folder (several
auditors: ``sheet-<who>.csv``). ``agreement`` reads every sheet and writes per label type n, raw
agreement and Cohen's κ between the LLM's and the person's labels with a bootstrap 95% CI.
"""

from __future__ import annotations

import csv
import math
import random
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from memprobe.report import inspect_site
from memprobe.spec import records
from memprobe.spec import sheets as csv_sheets
from memprobe.spec.records import Attribution, Bank, Episodes
from memprobe.vocabulary import FEEDBACK_TYPES

LabelType = Literal["feedback", "attribution"]
# The attribution labels an LLM stage decides (memprobe/protocol/attribution.py).
LLM_ATTRIBUTION_LABELS = (
    "task_design_failure",
    "memory_failure",
    "agent_elicitation_failure",
    "simulator_too_strict",
)
LABELS: dict[str, tuple[str, ...]] = {
    "feedback": FEEDBACK_TYPES,
    "attribution": LLM_ATTRIBUTION_LABELS,
}
SHEET_COLUMNS = ["item_id", "label_type", "llm_label", "verdict", "human_label"]
VERDICTS = ("agree", "disagree")
BOOTSTRAP_RESAMPLES = 2000


class AuditError(ValueError):
    """A sample that cannot be drawn or a sheet that does not match its sample."""


class AuditItem(BaseModel):
    id: str
    label_type: LabelType
    llm_label: str
    system: str
    user: str
    category: str
    # What a person needs to judge the label: [heading, text] pairs, shown as text.
    context: list[tuple[str, str]]


class AuditSample(BaseModel):
    name: str
    seed: int
    n: int
    labels: dict[str, list[str]]
    items: list[AuditItem]


# -- drawing the sample ------------------------------------------------------------------
def _item(key: str, label: str, system: str, user: str, category: str, context) -> AuditItem:
    """An item; its id starts with its label type (``feedback:...``, ``attribution:...``)."""
    where = {"system": system, "user": user, "category": category, "context": context}
    label_type = key.split(":", 1)[0]  # validated as a LabelType
    return AuditItem.model_validate(
        {"id": key, "label_type": label_type, "llm_label": label, **where}
    )


def _turn_items(root: Path, system: str, user: str, bank: Bank) -> list[AuditItem]:
    category = {e.dimension: e.category for e in bank.entries}
    eps = records.load(root / system / user / "episodes.json", Episodes)
    items = []
    for ep in eps.episodes:
        previous = ""
        for t in ep.turns:
            context = [("task", ep.task)]
            if previous:
                context.append(("user's previous message", previous))
            context += [("assistant reply", t.agent_response), ("user's answer", t.user_text)]
            key = f"feedback:{system}:{user}:{ep.index}:{t.turn}"
            cat = category.get(ep.target_dimension, "")
            items.append(_item(key, t.feedback_type, system, user, cat, context))
            previous = t.user_text
    return items


def _attribution_items(root: Path, system: str, user: str, bank: Bank) -> list[AuditItem]:
    explanation = {e.dimension: (e.short, e.explanation) for e in bank.entries}
    eps = {
        e.index: e for e in records.load(root / system / user / "episodes.json", Episodes).episodes
    }
    items = []
    for mode_dir in sorted(p for p in (root / system / user).iterdir() if p.is_dir()):
        path = mode_dir / "attribution.json"
        if not path.exists():
            continue
        att = records.load(path, Attribution)
        for d in att.details:
            if d.label not in LLM_ATTRIBUTION_LABELS:
                continue
            short, expl = explanation.get(d.dimension, ("", ""))
            context = [
                ("target", f"{d.dimension}: {short}"),
                ("explanation", expl),
                ("recovery score", f"{d.score:g} ({att.mode})"),
            ]
            ep = eps.get(d.ep_index) if d.ep_index else None
            if ep:
                context.append(("task", ep.task))
                for t in ep.turns:
                    context.append((f"assistant (turn {t.turn})", t.agent_response))
                    context.append((f"user (turn {t.turn})", t.user_text))
            for st in d.stages:
                rest = "; ".join(f"{k}: {v}" for k, v in st.items() if k != "stage")
                context.append((f"stage {st.get('stage', '?')}", rest))
            key = f"attribution:{system}:{att.mode}:{user}:{d.dimension}"
            items.append(_item(key, d.label, system, user, d.category, context))
    return items


def population(results_dir: str | Path) -> list[AuditItem]:
    """Every auditable item of a run, found from its per-user files."""
    root = Path(results_dir)
    items: list[AuditItem] = []
    for episodes in sorted(root.glob("*/user_*/episodes.json")):
        user, system = episodes.parent.name, episodes.parent.parent.name
        bank = records.load(root / "users" / user / "bank.json", Bank)
        items += _turn_items(root, system, user, bank)
        items += _attribution_items(root, system, user, bank)
    return items


def stratified(items: list[AuditItem], n: int, rng: random.Random) -> list[AuditItem]:
    """n items spread over (system, category, label) strata: one per stratum in turn."""
    strata: dict[tuple[str, str, str], list[AuditItem]] = defaultdict(list)
    for it in items:
        strata[it.system, it.category, it.llm_label].append(it)
    queues = []
    for key in sorted(strata):
        group = strata[key][:]
        rng.shuffle(group)
        queues.append(group)
    rng.shuffle(queues)
    picked: list[AuditItem] = []
    while len(picked) < n and any(queues):
        for q in queues:
            if q and len(picked) < n:
                picked.append(q.pop())
    return picked


def sample(results_dir: str | Path, n: int, seed: int, name: str) -> Path:
    """Draw n items per label type into results/audit/NAME/ (items.json and the sheet page)."""
    if n < 1:
        raise AuditError(f"--n: must be at least 1 (got {n})")
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise AuditError(f"--name {name!r}: use letters, digits, '-' and '_' only")
    out = Path(results_dir) / "audit" / name
    if out.exists():
        raise AuditError(f"{out} already exists (its sheets would be lost); choose another --name")
    pool = population(results_dir)
    if not pool:
        raise AuditError(f"{results_dir}: no episodes.json under */user_*/: nothing to audit")
    rng = random.Random(seed)
    picked = []
    for label_type in LABELS:
        picked += stratified([it for it in pool if it.label_type == label_type], n, rng)
    result = AuditSample(
        name=name, seed=seed, n=n, labels={k: list(v) for k, v in LABELS.items()}, items=picked
    )
    tmp = out.with_name(f".{name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    records.write_atomic(tmp / "items.json", result)
    (tmp / "assets").mkdir()
    for asset in ("inspect.css", "common.js", "audit.js"):
        shutil.copy(inspect_site.ASSETS / asset, tmp / "assets" / asset)
    (tmp / "index.html").write_text(
        inspect_site.html_page(f"MemProbe audit {name}", result.model_dump(), "audit.js", ""),
        encoding="utf-8",
    )
    tmp.rename(out)  # whole folder or nothing
    return out


# -- reading sheets and agreement --------------------------------------------------------
def read_sheet(path: str | Path, sample_: AuditSample) -> list[tuple[LabelType, str, str]]:
    """(label_type, llm_label, human_label) per marked row; unmarked rows are skipped."""
    items = {it.id: it for it in sample_.items}
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in SHEET_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise AuditError(f"{path}: missing column(s) {', '.join(missing)}")
        for line, row in enumerate(reader, start=2):
            where = f"{path}: line {line}"
            row = {k: csv_sheets.read_cell(v or "") for k, v in row.items() if k}
            item = items.get(row["item_id"])
            if item is None:
                raise AuditError(f"{where}: unknown item id {row['item_id']!r}")
            verdict = row["verdict"].strip()
            if not verdict:
                continue
            if verdict not in VERDICTS:
                raise AuditError(f"{where}: verdict {verdict!r}; expected agree or disagree")
            human = item.llm_label if verdict == "agree" else row["human_label"].strip()
            if human not in LABELS[item.label_type]:
                raise AuditError(
                    f"{where}: unknown {item.label_type} label {human!r}; expected one of "
                    f"{', '.join(LABELS[item.label_type])}"
                )
            out.append((item.label_type, item.llm_label, human))
    return out


def cohen_kappa(pairs: list[tuple[str, str]]) -> float | None:
    """Cohen's κ of two raters; None where chance agreement is 1 (one label everywhere)."""
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    expected = sum(first[k] * second[k] for k in first) / n**2
    if math.isclose(expected, 1.0):
        return None
    return (observed - expected) / (1 - expected)


def bootstrap_ci(pairs: list[tuple[str, str]], seed: int) -> tuple[float | None, float | None]:
    """Percentile 95% CI of κ over items resampled with replacement (undefined draws dropped)."""
    rng = random.Random(seed)
    draws = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        k = cohen_kappa([pairs[rng.randrange(len(pairs))] for _ in pairs])
        if k is not None:
            draws.append(k)
    if not draws:
        return None, None
    draws.sort()
    return draws[int(0.025 * (len(draws) - 1))], draws[int(0.975 * (len(draws) - 1))]


def agreement_rows(sheets: list[str | Path], seed: int = 0) -> list[dict]:
    by_type: dict[str, list[tuple[str, str]]] = {t: [] for t in LABELS}
    for sheet in sheets:
        items = Path(sheet).parent / "items.json"
        if not items.exists():
            raise AuditError(
                f"{sheet}: no items.json next to it (a sheet lives in its sample's folder)"
            )
        sample_ = records.load(items, AuditSample)
        for kind, llm, human in read_sheet(sheet, sample_):
            by_type[kind].append((llm, human))
    rows = []
    for label_type, pairs in by_type.items():
        kappa = cohen_kappa(pairs)
        lo, hi = bootstrap_ci(pairs, seed) if pairs else (None, None)
        rows.append(
            {
                "label_type": label_type,
                "n": len(pairs),
                "raw_agreement": _cell(
                    sum(a == b for a, b in pairs) / len(pairs) if pairs else None
                ),
                "kappa": _cell(kappa),
                "kappa_ci_low": _cell(lo),
                "kappa_ci_high": _cell(hi),
            }
        )
    return rows


def _cell(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def agreement_csv(sheets: list[str | Path], seed: int = 0) -> str:
    if not sheets:
        raise AuditError("no filled sheets: save them as results/audit/<name>/sheet*.csv")
    rows = agreement_rows(sheets, seed)
    return csv_sheets.csv_text(rows, list(rows[0]))
