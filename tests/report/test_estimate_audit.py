"""The audit of a finished run's calls (memprobe/report/estimate_audit.py)."""

from __future__ import annotations

from memprobe.report import estimate_audit
from tests.helpers.estimate import tiny_cfg, write_run


def test_audit_explains_every_extra_call(tmp_path):
    reask = {"job": "judge/longctx_full_user_001_dump_all", "role": "judge", "reask": 1,
             "status": "ok", "cached": "false", "prompt_tokens": 1, "completion_tokens": 1,
             "latency_s": 1, "ts": 0, "model": "m", "key": "k"}  # fmt: skip
    write_run(tmp_path, [3, 5], [reask])
    (row,) = estimate_audit.audit(tmp_path, tiny_cfg())
    # 8 turns x (assistant + simulator + preference) + 2 slot-fills + 1 judge + 2 attribution
    assert row.protocol == 8 * 3 + 2 + 1 + 2
    assert row.ledger == row.protocol + 1 and row.reasks == 1 and row.unexplained == 0

    stray = dict(reask, reask=0)  # a call the protocol does not need and nothing explains
    write_run(tmp_path / "b", [3, 5], [stray])
    (row,) = estimate_audit.audit(tmp_path / "b", tiny_cfg())
    assert row.unexplained == 1


def test_audit_lists_a_system_it_cannot_count_as_unknown(tmp_path):
    """mem0's write side is data-dependent: its rows are reported, never dropped."""
    row = {"job": "rollout/mem0_user_001", "role": "writer", "reask": 0, "status": "ok",
           "cached": "false", "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 1,
           "ts": 0, "model": "m", "key": "k"}  # fmt: skip
    write_run(tmp_path, [3, 5], [row])
    rows = {r.system: r for r in estimate_audit.audit(tmp_path, tiny_cfg())}
    assert set(rows) == {"longctx_full", "mem0"}
    assert rows["mem0"].protocol is None and rows["mem0"].unexplained is None
    assert rows["mem0"].ledger == 1 and rows["mem0"].excess is None
