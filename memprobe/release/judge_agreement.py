"""The offline judge against the paper's judge: fit it on some release users, measure it on
others (``memprobe offline-judge fit|measure``, docs/fidelity.md's table of judges)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel

from memprobe.config.stages import parse_users
from memprobe.protocol import calibration, offline_judge
from memprobe.release.judge_verdicts import stratified, verdicts


def fit(release_dir: str | Path, users: str, encode: offline_judge.Encode) -> offline_judge.Params:
    pairs = verdicts(release_dir, parse_users(users))
    return offline_judge.fit(
        [v.item() for v in pairs],
        [v.score for v in pairs],
        encode,
        fitted_on=f"the release's recorded judge scores of users {users}: {len(pairs)} "
        "non-unknown labels over all its runs",
    )


class Measured(BaseModel):
    users: str
    n_natural: int
    stratified: calibration.Summary  # the seeded sample, equal per recorded level
    natural: calibration.Summary  # every non-unknown label of the users
    run_mean_diff: dict[str, float]  # per release run: our mean - the recorded mean


def measure(
    release_dir: str | Path,
    users: str,
    n: int,
    seed: int,
    params: offline_judge.Params,
    encode: offline_judge.Encode,
) -> Measured:
    """The scorer on every judged label of ``users`` (it never grades a pair twice)."""
    pairs = verdicts(release_dir, parse_users(users))
    sample = stratified(pairs, n, seed)
    scored = offline_judge.grade(params, [v.item() for v in pairs], {}, encode)
    ours = {v.id: float(r.score) for v, r in zip(pairs, scored, strict=True)}
    by_run: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for v in pairs:
        by_run[v.run].append((v.score, ours[v.id]))
    return Measured(
        users=users,
        n_natural=len(pairs),
        stratified=calibration.agreement([v.score for v in sample], [ours[v.id] for v in sample]),
        natural=calibration.agreement([v.score for v in pairs], [ours[v.id] for v in pairs]),
        run_mean_diff={
            run: sum(o - r for r, o in rows) / len(rows) for run, rows in sorted(by_run.items())
        },
    )


def report(m: Measured) -> str:
    s, nat = m.stratified, m.natural
    diffs = m.run_mean_diff.values()
    lines = [
        f"offline judge vs the paper's judge, users {m.users}",
        "| n | exact | within one | bias | κ stratified | κ natural | per-run mean difference |",
        "|---|---|---|---|---|---|---|",
        f"| {s.n} (+{m.n_natural} natural) | {s.exact:.2f} | {s.within_one:.2f} | "
        f"{s.bias:+.3f} | {s.kappa:.3f} | {nat.kappa:.3f} | "
        f"{min(diffs):+.3f} .. {max(diffs):+.3f} |",
        f"natural: exact {nat.exact:.2f}, within one {nat.within_one:.2f}, bias {nat.bias:+.3f}",
        *(f"  {run}: {d:+.3f}" for run, d in m.run_mean_diff.items()),
    ]
    return "\n".join(lines)
