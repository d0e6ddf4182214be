"""Reading table rows in tests, and Judge records built by hand."""

from __future__ import annotations

import math

import pandas as pd

from memprobe.spec.records import Judge, JudgeEntry


def row(df: pd.DataFrame, **keys) -> dict:
    sel = df
    for k, v in keys.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, keys
    return sel.iloc[0].to_dict()


def close(a, b) -> bool:
    return a is not None and not pd.isna(a) and math.isclose(float(a), b, abs_tol=5e-6)


# -- beyond the paper: every table a hand value, and CIs that can fail ---------------------
def judge_of(system, user, overall, mode="dump_all", flag=False, details=(), per_category=None):
    return Judge(
        user_id=user,
        system=system,
        mode=mode,
        overflow=flag,
        overflow_strategy="flag" if flag else None,
        per_category=dict(per_category or {}),
        overall=overall,
        details=list(details),
    )


def entry_of(category="skill_memory", score=0.0, **fields) -> JudgeEntry:
    """One judged label; fields not given are empty (dimension "d", mode dump_all)."""
    base = {
        "category": category,
        "dimension": "d",
        "explanation": "",
        "ground_truth": "",
        "predicted": "",
        "slot_fill_reason": "",
        "score": score,
        "judge_reason": "",
        "scoring_mode": "dump_all",
    }
    return JudgeEntry.model_validate(base | fields)
