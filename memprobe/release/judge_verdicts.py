"""The release's recorded judge verdicts: the yardstick for our judges (issue 25).

Every ``output/<run>/recon_judge/user_XXX.json`` of the release holds, per (user, dimension),
the truth, the bank explanation, the slot-fill label and the score the paper's judge gave it
(docs/release-format.md §2.8). A label "unknown" carries no judgement (the rubric gives it 0),
so only the other labels are pairs. Users are chosen by number: the offline judge is fitted
on 1-25 and measured on 26-50. ``judge.calibration.source: release`` draws the run's
calibration pairs from here.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from memprobe.config.schema import Config
from memprobe.config.stages import parse_users
from memprobe.protocol import calibration
from memprobe.protocol.slotfill import is_unknown
from memprobe.spec.records import RecordError, inside
from memprobe.spec.records import load as load_record
from memprobe.spec.rubric import LEVELS

_USER_FILE = re.compile(r"user_(\d+)\.json")


def verdicts(release_dir: str | Path, users: set[int]) -> list[calibration.Anchor]:
    """Every non-"unknown" judged label of the listed users, over every run of the release,
    in a fixed order (run, user, bank order), as calibration pairs scored at the recorded
    level."""
    from memprobe.release.formats import RawReconJudge

    out_dir = Path(release_dir) / "output"
    runs = sorted(p for p in out_dir.glob("*/recon_judge") if not p.parent.name.startswith("_"))
    key = "judge.calibration.release_dir"  # every read inside it, as the importer's
    if not runs:
        raise RecordError(f"{out_dir}: no <run>/recon_judge folders (is release_dir the release?)")
    found: list[calibration.Anchor] = []
    for judged in runs:
        for path in sorted(judged.glob("user_*.json")):
            m = _USER_FILE.fullmatch(path.name)
            if not m or int(m[1]) not in users:
                continue
            raw = load_record(inside(release_dir, path, key), RawReconJudge)
            found += [
                calibration.Anchor(
                    id=f"{judged.parent.name}/{path.stem}/{d.dimension}",
                    category=d.category,  # type: ignore[arg-type]
                    dimension=d.dimension,
                    explanation=d.explanation,
                    truth=d.ground_truth,
                    label=d.predicted,
                    kind="recorded",
                    score=d.score,
                    user=path.stem,
                    run=judged.parent.name,
                )
                for d in raw.details
                if not is_unknown(d.predicted)
            ]
    if not found:
        raise RecordError(f"{out_dir}: no judged labels for users {sorted(users)[:3]}...")
    return found


def stratified(pairs: list[calibration.Anchor], n: int, seed: int) -> list[calibration.Anchor]:
    """``n`` pairs, ``n / 5`` per recorded level, drawn with ``seed`` (ValueError when a level
    has too few)."""
    per, rest = divmod(n, len(LEVELS))
    if rest:
        raise ValueError(f"n = {n}: expected a multiple of {len(LEVELS)} (equal per level)")
    rng = random.Random(seed)
    drawn: list[calibration.Anchor] = []
    for level in LEVELS:
        pool = [p for p in pairs if p.score == level]
        if len(pool) < per:
            raise ValueError(f"only {len(pool)} recorded pairs at level {level:g}, {per} needed")
        drawn += rng.sample(pool, per)
    return drawn


def release_anchors(release_dir: str, users: str, n: int, seed: int) -> calibration.Anchors:
    """``n`` pairs the paper's judge scored (``n / 5`` per recorded level), drawn with ``seed``
    from the non-"unknown" labels of ``users`` over every run of the release."""
    return calibration.Anchors(items=stratified(verdicts(release_dir, parse_users(users)), n, seed))


def calibration_pairs(cfg: Config, anchors_path: str | Path) -> calibration.Anchors:
    """The run's calibration pairs: the anchors file, or a draw from the release."""
    cal = cfg.judge.calibration
    if cal.source == "release":
        try:
            assert cal.release_dir, "set when the config loads (config/schema.py)"
            return release_anchors(cal.release_dir, cal.users, cal.n, cfg.seed)
        except ValueError as err:  # RecordError too
            raise calibration.CalibrationError(
                f"judge.calibration (source: release): {err}"
            ) from None
    return calibration.load_anchors(anchors_path)
