"""The estimate's calls (memprobe/report/estimate_calls.py): the protocol's counts per role, as
the config scales them, with a system's unknowns kept and the judge's calls by its form."""

from __future__ import annotations

import pytest

from memprobe.config.loading import load_config
from memprobe.registry import systems as registry
from memprobe.report import estimate, estimate_calls, estimate_rates
from tests.helpers.estimate import paper_like
from tests.helpers.workflow import ROOT


def test_protocol_counts_follow_the_protocol():
    cfg = load_config(paper_like())
    rates = estimate_rates.priors(cfg)
    calls = estimate_calls.protocol_calls(cfg, rates)
    d = cfg.n_dims
    # per user: persona + one bank call per category + one writer per task; one oracle per dim
    assert calls[("(per user)", "generator")] == 1 + 5
    assert calls[("(per user)", "task_writer")] == d
    assert calls[("(per user)", "oracle")] == d
    for s in cfg.systems:
        t = rates.turns_per_episode[s] * d
        assert calls[(s, "assistant")] == pytest.approx(t)
        assert calls[(s, "simulator")] == pytest.approx(t)
        assert calls[(s, "preference")] == pytest.approx(t)
    # A-Mem: analyze per note, evolve per note but the first; one note per turn + episode end
    t = rates.turns_per_episode["amem"] * d
    assert calls[("amem", "writer")] == pytest.approx(2 * (t + d) - 1)
    # nomem stores nothing: slot-fill (and so the judge) make no call; it has no retrieve mode
    assert calls[("nomem", "slotfill")] == 0 and calls[("nomem", "judge")] == 0
    assert calls[("longctx_full", "slotfill")] == 2 * d  # dump_all + retrieve


def test_counts_scale_with_the_config():
    base = load_config(paper_like())
    small = load_config(
        paper_like(
            n_users=5,
            dims_per_category={
                "skill_memory": 2,
                "knowledge_memory": 2,
                "episodic_memory": 2,
                "self_model": 1,
                "assistance_preference": 0,
            },
            modes=["dump_all"],
        )
    )
    big = {(x.system, x.role): x for x in estimate_calls.predict(base, estimate_rates.priors(base))}
    few = {
        (x.system, x.role): x for x in estimate_calls.predict(small, estimate_rates.priors(small))
    }
    assert few[("(per user)", "generator")].calls_per_user == 1 + 4  # 4 non-empty categories
    assert few[("(per user)", "task_writer")].calls_per_user == 7
    assert few[("longctx_full", "preference")].calls == 0  # no preference dims, no D calls
    assert few[("longctx_full", "slotfill")].calls_per_user == 7  # dump_all only
    assert big[("longctx_full", "slotfill")].calls == 50 * 62


def test_a_system_without_priors_is_unknown_not_dropped(monkeypatch):
    mem0 = registry.spec("mem0")
    monkeypatch.setitem(registry.specs(), "mem0", mem0.model_copy(update={"priors": None}))
    cfg = load_config(paper_like())
    rates = estimate_rates.priors(cfg)
    lines = {(x.system, x.role): x for x in estimate_calls.predict(cfg, rates)}
    assert lines[("mem0", "assistant")].prompt_tokens is None
    assert lines[("mem0", "assistant")].calls > 0  # still counted
    assert "no prior for mem0" in lines[("mem0", "assistant")].tokens_from
    rows = {r["component"]: r for r in estimate_calls.table5_compare(cfg, list(lines.values()))}
    assert rows["mem0"]["predicted_M"] is None
    report = estimate.report(cfg, rates)
    assert "unknown" in report and "no cost priors: mem0 (" in report


def test_the_judge_form_and_calibration_source_set_the_judges_calls():
    def judge_calls(**judge) -> dict[str, float]:
        cfg = load_config(paper_like(judge=judge, release_dir=str(ROOT / "tests")))
        lines = estimate_calls.predict(cfg, estimate_rates.priors(cfg))
        return {x.system: x.calls for x in lines if x.role == "judge"}

    llm = judge_calls()
    assert llm["(per run)"] == 47 and llm["longctx_full"] > 0  # one call per anchor
    assert judge_calls(calibration={"source": "release", "n": 100})["(per run)"] == 100
    assert not any(judge_calls(form="scorer").values())  # the offline judge calls no LLM
