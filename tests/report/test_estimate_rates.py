"""The estimate's rates (memprobe/report/estimate_rates.py): priors from the release's budget,
observed ones from an earlier run's ledger and artifacts, a replay's recorded turns."""

from __future__ import annotations

import csv

import pytest

from memprobe.config.loading import load_config
from memprobe.llm.ledger import COLUMNS
from memprobe.report import estimate_calls, estimate_rates
from tests.helpers.estimate import paper_like, tiny_cfg, write_run


def test_retrieve_attribution_pays_only_the_questions_dump_all_did_not_ask():
    """With the transcript (our fix), a target missed in both modes asks dump_all's Stage 1/2
    questions again and the cache answers them; the release's empty transcript asked anew."""
    ours = estimate_rates.priors(load_config(paper_like()))
    compat = {"retrieve_attribution_empty_transcript": True}
    release = estimate_rates.priors(load_config(paper_like(compat=compat)))
    for s in ("amem", "longctx_full", "mem0"):
        paid = estimate_rates.system_priors(s).retrieve_attribution_paid
        assert ours.disclosure_per_dim[f"{s}/retrieve"] == pytest.approx(
            release.disclosure_per_dim[f"{s}/retrieve"] * paid
        )
        assert paid < 0.5
        assert (
            ours.disclosure_per_dim[f"{s}/dump_all"] == release.disclosure_per_dim[f"{s}/dump_all"]
        )


def test_observed_rates_come_from_the_ledger_and_artifacts(tmp_path):
    write_run(tmp_path, [3, 5], [])
    rates = estimate_rates.observed(tmp_path, tiny_cfg())
    assert rates is not None and str(tmp_path) in rates.source
    assert rates.turns_per_episode["longctx_full"] == 4.0
    assert rates.critic_rounds_per_task == 1.5
    assert rates.judge_share["longctx_full/dump_all"] == 0.5  # one label was "unknown"
    assert rates.disclosure_per_dim["longctx_full/dump_all"] == 1.0  # 2 stages over 2 dims
    assert rates.tokens["assistant/longctx_full"] == (400.0, 20.0)
    # without a ledger there are no observed rates
    assert estimate_rates.observed(tmp_path / "nothing", tiny_cfg()) is None


def test_observed_disclosure_counts_the_paid_questions_not_the_cached_ones(tmp_path):
    # The artifact lists two stage questions; the other mode had already asked one (the same
    # transcript and target), so the cache answered it: one call paid over the two dims.
    write_run(tmp_path, [3, 5], [])
    ledger = tmp_path / "usage" / "attribution" / "x.csv"
    rows = list(csv.DictReader(ledger.open()))
    rows[1]["cached"] = "true"
    with open(ledger, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    rates = estimate_rates.observed(tmp_path, tiny_cfg())
    assert rates is not None and rates.disclosure_per_dim["longctx_full/dump_all"] == 0.5


# -- rollout.replay: the recorded run's conversations, no conversation calls ------------------
def test_a_replay_pays_no_conversation_and_takes_the_recorded_turns():
    from memprobe.release import layout
    from tests.helpers.release_fixture import FIXTURE

    live = load_config(paper_like(users={"source": "release"}, release_dir=str(FIXTURE)))
    cfg = load_config(
        paper_like(
            users={"source": "release"},
            release_dir=str(FIXTURE),
            rollout={"replay": "longctx_full_pooled_50"},
        )
    )
    d = cfg.n_dims
    # every system replays longctx_full's conversations: its turns, whatever the system (the
    # prior where the files are not at hand)
    rates = estimate_rates.replayed_turns(cfg, estimate_rates.priors(cfg), "longctx_full", None)
    assert set(rates.turns_per_episode.values()) == {77.7 / 31}
    assert "turns: longctx_full's prior" in rates.source
    calls = estimate_calls.protocol_calls(cfg, rates)
    before = estimate_calls.protocol_calls(live, estimate_rates.priors(live))
    for s in cfg.systems:
        for role in ("assistant", "simulator", "preference"):
            assert calls[(s, role)] == 0 and before[(s, role)] > 0
        for role in ("slotfill", "judge", "disclosure"):
            assert calls[(s, role)] == before[(s, role)]
    t = 77.7 / 31 * d
    assert calls[("amem", "writer")] == pytest.approx(2 * (t + d) - 1)  # its own writes
    # the release's users are imported, not generated (a live run on them neither)
    for role in ("generator", "task_writer", "critic", "editor"):
        assert calls[("(per user)", role)] == 0 == before[("(per user)", role)]
    assert calls[("(per user)", "oracle")] == d

    # With the release at hand, the turns are counted in the recorded files: the fixture's
    # longctx run has 12 + 16 + 8 turns over its 3 users' 8 episodes.
    small = load_config(
        paper_like(
            n_users=3,
            users={"source": "release"},
            release_dir=str(FIXTURE),
            dims_per_category={"skill_memory": 2, "knowledge_memory": 2, "episodic_memory": 2,
                               "self_model": 1, "assistance_preference": 1},
            rollout={"replay": "longctx_full_pooled_50"},
        )
    )  # fmt: skip
    assert layout.recorded_turns(small) == 36 / 24
    counted = estimate_rates.replayed_turns(
        small, estimate_rates.priors(small), "longctx_full", 36 / 24
    )
    assert set(counted.turns_per_episode.values()) == {36 / 24}
    assert "counted in longctx_full_pooled_50's recorded episodes" in counted.source
    # files not all at hand (more users than the fixture holds): the prior
    assert layout.recorded_turns(cfg) is None
    assert layout.recorded_system("memt_memonly_pooled_50") == "memt"
    assert layout.recorded_system("longctx_full_pooled_50") == "longctx_full"
    # a live run is left alone
    assert estimate_rates.replayed_turns(
        live, estimate_rates.priors(live), "x", 1.0
    ).turns_per_episode == (estimate_rates.priors(live).turns_per_episode)
