"""memprobe estimate: protocol call counts, rates from a ledger, the audit, the command."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memprobe.config import load_config
from memprobe.llm.ledger import COLUMNS
from memprobe.registry import systems as registry
from memprobe.report import estimate
from tests.helpers.workflow import ROOT

CLI = str(Path(sys.executable).with_name("memprobe"))


def paper_like(**over) -> dict:
    raw = {
        "n_users": 50,
        "systems": ["nomem", "longctx_full", "amem", "mem0"],
        "max_turns": 25,
        "llm": {"backend": "openai", "base_url": "http://127.0.0.1:1/v1"},
    }
    raw.update(over)
    return raw


def test_protocol_counts_follow_the_protocol():
    cfg = load_config(paper_like())
    rates = estimate.priors(cfg)
    calls = estimate.protocol_calls(cfg, rates)
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
    big = {(x.system, x.role): x for x in estimate.predict(base, estimate.priors(base))}
    few = {(x.system, x.role): x for x in estimate.predict(small, estimate.priors(small))}
    assert few[("(per user)", "generator")].calls_per_user == 1 + 4  # 4 non-empty categories
    assert few[("(per user)", "task_writer")].calls_per_user == 7
    assert few[("longctx_full", "preference")].calls == 0  # no preference dims, no D calls
    assert few[("longctx_full", "slotfill")].calls_per_user == 7  # dump_all only
    assert big[("longctx_full", "slotfill")].calls == 50 * 62


def _write_run(root: Path, turns_per_episode: list[int], extra_rows: list[dict]) -> None:
    """A finished longctx_full run of one user: artifacts + a ledger that matches them."""
    base = root / "longctx_full" / "user_001"
    (base / "dump_all").mkdir(parents=True)
    eps = [{"index": i + 1, "turns": [{}] * n} for i, n in enumerate(turns_per_episode)]
    (base / "episodes.json").write_text(json.dumps({"episodes": eps}))
    (base / "memories.json").write_text(json.dumps({"memories": [{"content": "x"}]}))
    entries = [
        {"category": "skill_memory", "dimension": "a", "label": "likes lists", "called": True},
        {"category": "skill_memory", "dimension": "b", "label": "unknown", "called": True},
    ]
    (base / "dump_all" / "slotfill.json").write_text(json.dumps({"entries": entries}))
    (base / "dump_all" / "judge.json").write_text("{}")
    stages = [{"stage": "oracle"}, {"stage": "disclosure"}, {"stage": "disclosure_subclass"}]
    (base / "dump_all" / "attribution.json").write_text(
        json.dumps({"details": [{"stages": []}, {"stages": stages}]})
    )
    users = root / "users" / "user_001"
    users.mkdir(parents=True)
    tasks = [{"verdicts": [{}, {}]}, {"verdicts": [{}]}]
    (users / "tasks.json").write_text(json.dumps({"tasks": tasks}))

    def rows(rule, tag, role, n, tokens=(100, 10)):
        return [
            {"job": f"{rule}/{tag}", "role": role, "prompt_tokens": tokens[0],
             "completion_tokens": tokens[1], "latency_s": 1.0, "cached": "false",
             "reask": 0, "status": "ok", "ts": 0, "model": "m", "key": "k"}
            for _ in range(n)
        ]  # fmt: skip

    turns = sum(turns_per_episode)
    ledger = {
        "rollout": rows("rollout", "longctx_full_user_001", "assistant", turns, (400, 20))
        + rows("rollout", "longctx_full_user_001", "simulator", turns),
        "preference": rows("preference", "longctx_full_user_001", "preference", turns),
        "slotfill": rows("slotfill", "longctx_full_user_001_dump_all", "slotfill", 2),
        "judge": rows("judge", "longctx_full_user_001_dump_all", "judge", 1),
        "attribution": rows("attribution", "longctx_full_user_001_dump_all", "disclosure", 2),
    }
    for row in extra_rows:
        ledger.setdefault(row["job"].split("/")[0], []).append(row)
    for rule, rs in ledger.items():
        f = root / "usage" / rule / "x.csv"
        f.parent.mkdir(parents=True, exist_ok=True)
        with open(f, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rs)


def tiny_cfg():
    return load_config(
        {
            "n_users": 1,
            "systems": ["longctx_full"],
            "modes": ["dump_all"],
            "llm": {"backend": "openai", "base_url": "http://127.0.0.1:1/v1"},
        }
    )


def test_retrieve_attribution_pays_only_the_questions_dump_all_did_not_ask():
    """With the transcript (our fix), a target missed in both modes asks dump_all's Stage 1/2
    questions again and the cache answers them; the release's empty transcript asked anew."""
    ours = estimate.priors(load_config(paper_like()))
    compat = {"retrieve_attribution_empty_transcript": True}
    release = estimate.priors(load_config(paper_like(compat=compat)))
    for s in ("amem", "longctx_full", "mem0"):
        paid = estimate.system_priors(s).retrieve_attribution_paid
        assert ours.disclosure_per_dim[f"{s}/retrieve"] == pytest.approx(
            release.disclosure_per_dim[f"{s}/retrieve"] * paid
        )
        assert paid < 0.5
        assert (
            ours.disclosure_per_dim[f"{s}/dump_all"] == release.disclosure_per_dim[f"{s}/dump_all"]
        )


def test_observed_rates_come_from_the_ledger_and_artifacts(tmp_path):
    _write_run(tmp_path, [3, 5], [])
    rates = estimate.observed(tmp_path, tiny_cfg())
    assert rates is not None and str(tmp_path) in rates.source
    assert rates.turns_per_episode["longctx_full"] == 4.0
    assert rates.critic_rounds_per_task == 1.5
    assert rates.judge_share["longctx_full/dump_all"] == 0.5  # one label was "unknown"
    assert rates.disclosure_per_dim["longctx_full/dump_all"] == 1.0  # 2 stages over 2 dims
    assert rates.tokens["assistant/longctx_full"] == (400.0, 20.0)
    # without a ledger there are no observed rates
    assert estimate.observed(tmp_path / "nothing", tiny_cfg()) is None


def test_observed_disclosure_counts_the_paid_questions_not_the_cached_ones(tmp_path):
    # The artifact lists two stage questions; the other mode had already asked one (the same
    # transcript and target), so the cache answered it: one call paid over the two dims.
    _write_run(tmp_path, [3, 5], [])
    ledger = tmp_path / "usage" / "attribution" / "x.csv"
    rows = list(csv.DictReader(ledger.open()))
    rows[1]["cached"] = "true"
    with open(ledger, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    rates = estimate.observed(tmp_path, tiny_cfg())
    assert rates is not None and rates.disclosure_per_dim["longctx_full/dump_all"] == 0.5


def test_audit_explains_every_extra_call(tmp_path):
    reask = {"job": "judge/longctx_full_user_001_dump_all", "role": "judge", "reask": 1,
             "status": "ok", "cached": "false", "prompt_tokens": 1, "completion_tokens": 1,
             "latency_s": 1, "ts": 0, "model": "m", "key": "k"}  # fmt: skip
    _write_run(tmp_path, [3, 5], [reask])
    (row,) = estimate.audit(tmp_path, tiny_cfg())
    # 8 turns x (assistant + simulator + preference) + 2 slot-fills + 1 judge + 2 attribution
    assert row.protocol == 8 * 3 + 2 + 1 + 2
    assert row.ledger == row.protocol + 1 and row.reasks == 1 and row.unexplained == 0

    stray = dict(reask, reask=0)  # a call the protocol does not need and nothing explains
    _write_run(tmp_path / "b", [3, 5], [stray])
    (row,) = estimate.audit(tmp_path / "b", tiny_cfg())
    assert row.unexplained == 1


def test_audit_lists_a_system_it_cannot_count_as_unknown(tmp_path):
    """mem0's write side is data-dependent: its rows are reported, never dropped."""
    row = {"job": "rollout/mem0_user_001", "role": "writer", "reask": 0, "status": "ok",
           "cached": "false", "prompt_tokens": 1, "completion_tokens": 1, "latency_s": 1,
           "ts": 0, "model": "m", "key": "k"}  # fmt: skip
    _write_run(tmp_path, [3, 5], [row])
    rows = {r.system: r for r in estimate.audit(tmp_path, tiny_cfg())}
    assert set(rows) == {"longctx_full", "mem0"}
    assert rows["mem0"].protocol is None and rows["mem0"].unexplained is None
    assert rows["mem0"].ledger == 1 and rows["mem0"].excess is None


def test_cli_prints_per_role_counts_and_table5(tmp_path):
    cfg = tmp_path / "paper.yaml"
    cfg.write_text(yaml.safe_dump(paper_like()))
    out = subprocess.run(
        [CLI, "estimate", "--configfile", str(cfg), "--no-ledger"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for s in ("nomem", "longctx_full", "amem", "mem0"):
        paper = sum(registry.spec(s).priors.table5_m)
        assert any(
            line.strip().startswith(s) and f"{paper:.2f}" in line for line in out.splitlines()
        )
    assert "attribution" in out and "priors:" in out


def test_cli_bad_config_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(paper_like(n_users=0)))
    proc = subprocess.run(
        [CLI, "estimate", "--configfile", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "n_users" in proc.stderr


def test_cli_refuses_a_key_given_twice_in_one_line(tmp_path):
    # As the Snakefile does: YAML keeps the last of two keys silently.
    text = yaml.safe_dump(paper_like(n_users=3), sort_keys=False)
    dup = tmp_path / "dup.yaml"
    dup.write_text(text + "n_users: 50\n")
    proc = subprocess.run(
        [CLI, "estimate", "--configfile", str(dup), "--no-ledger"], capture_output=True, text=True
    )
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert "key 'n_users' appears twice" in proc.stderr


def _estimate(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "estimate", *args], cwd=cwd, capture_output=True, text=True)


def _table5(out: str) -> dict[str, float | None]:
    """component -> predicted / paper, from the report's comparison block."""
    rows = {}
    for line in out.split("vs paper Table 5")[1].splitlines()[1:]:
        name, _, pred, _, paper, _, ratio = line.split()
        rows[name] = None if ratio == "-" else float(ratio)
    return rows


def test_paper_estimate_without_a_ledger_plans_tokens_money_and_hours(tmp_path):
    """Must-show 1: calls, tokens (completion included), money and hours before any run."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("gpt-5.4-mini: {input: 0.25, output: 2.0}\n")
    proc = _estimate(
        "--configfile", "config/paper.yaml", "--no-ledger", "--prices", str(prices),
        "--latency", "4", "--llm-slots", "16",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    ratios = _table5(out)
    for system in ("nomem", "longctx_full", "amem", "mem0", "memt", "attribution"):
        assert 0.5 <= ratios[system] <= 2.0, (system, ratios[system])
    # completion tokens are predicted, not 0
    total = next(x for x in out.splitlines() if x.startswith("total")).split()
    assert int(total[3]) > 1_000_000
    # money: every gpt-5.4-mini line priced; Mem-T-4B's local calls listed, not dropped
    assert "USD for the priced calls" in out
    assert "not priced: memt writer (Mem-T-4B: no price" in out
    assert "llm_slots 16 (a task-writing or rollout job sends one call at a time" in out
    # the documented plain form: an earlier run's rates where there is one, else the priors
    plain = _estimate("--configfile", "config/paper.yaml")
    assert plain.returncode == 0 and "rates: " in plain.stdout, plain.stderr


def test_money_is_tokens_times_the_price(monkeypatch):
    cfg = load_config(paper_like())
    lines = estimate.predict(cfg, estimate.priors(cfg))
    price = estimate.Price(input=1.0, output=10.0)
    usd, unpriced = estimate.money(lines, {"gpt-5.4-mini": price})
    p = sum(x.prompt_tokens for x in lines)
    c = sum(x.completion_tokens for x in lines)
    assert usd == pytest.approx(p / 1e6 + 10 * c / 1e6) and unpriced == []
    usd, unpriced = estimate.money(lines, {})
    assert usd == 0 and len(unpriced) == sum(1 for x in lines if x.calls)


def test_a_system_without_priors_is_unknown_not_dropped(monkeypatch):
    mem0 = registry.spec("mem0")
    monkeypatch.setitem(registry.specs(), "mem0", mem0.model_copy(update={"priors": None}))
    cfg = load_config(paper_like())
    rates = estimate.priors(cfg)
    lines = {(x.system, x.role): x for x in estimate.predict(cfg, rates)}
    assert lines[("mem0", "assistant")].prompt_tokens is None
    assert lines[("mem0", "assistant")].calls > 0  # still counted
    assert "no prior for mem0" in lines[("mem0", "assistant")].tokens_from
    rows = {r["component"]: r for r in estimate.table5_compare(cfg, list(lines.values()))}
    assert rows["mem0"]["predicted_M"] is None
    report = estimate.report(cfg, rates)
    assert "unknown" in report and "no cost priors: mem0 (" in report


def test_configs_layer_as_in_snakemake(tmp_path):
    """config/config.yaml first, then each --configfile, then --config (dotted keys nest)."""
    site = tmp_path / "openai.yaml"
    site.write_text("llm: {backend: openai, base_url: 'http://127.0.0.1:1/v1'}\n")
    proc = _estimate("--configfile", str(site), "--config", "n_users=7", "llm.concurrency=3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("memprobe estimate: 7 users x 5 dims")  # 5: config.yaml's
    assert "llm.concurrency 3" in proc.stdout
    # release_dir on the command line, as for snakemake (users.source: release needs it)
    rel = _estimate("--config", "users={source: release}", f"release_dir={tmp_path}")
    assert rel.returncode == 0, rel.stderr
    # no --configfile: the default config
    assert _estimate().stdout.startswith("memprobe estimate: 1 user x 5 dims")
    # a typo is blamed on where it came from
    bad = _estimate("--config", "n_user=3")
    assert (
        bad.returncode == 1 and bad.stderr == "memprobe estimate: --config: n_user: unknown key\n"
    )


def test_a_missing_ledger_is_one_line(tmp_path):
    proc = _estimate("--ledger", str(tmp_path / "nope"))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "--ledger" in proc.stderr and "nope" in proc.stderr
    # no ledger in the run's folder (the default run's: results_dir): the priors, said so
    out = _estimate("--config", f"results_dir={tmp_path}").stdout
    assert f"no ledger under {tmp_path}/usage" in out


DOCUMENTED = "memprobe estimate --configfile config/paper.yaml --no-ledger --prices prices.yaml"


def documented_example() -> tuple[str, list[str]]:
    """The docs' paper-scale estimate: its command and the output lines they show (the code
    block after it, in the same doc, that starts with the `total` line)."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = doc.read_text(encoding="utf-8").splitlines()
        at = [i for i, line in enumerate(lines) if line.strip().startswith(DOCUMENTED)]
        if not at:
            continue
        start = next(i for i in range(at[0] + 1, len(lines)) if lines[i].startswith("    total "))
        shown = []
        for out in lines[start:]:
            if out and not out.startswith("    "):
                break
            shown.append(out.strip())
        return lines[at[0]].strip(), [x for x in shown if x and "..." not in x]
    raise AssertionError(f"no doc shows `{DOCUMENTED}`")


def test_the_documented_paper_estimate_is_what_the_command_prints(tmp_path):
    """Issue 32: every output line the docs show is a line the command prints today."""
    command, shown = documented_example()
    (tmp_path / "prices.yaml").write_text("gpt-5.4-mini: {input: 0.25, output: 2.0}\n")
    args = command.split()[2:]
    args[args.index("prices.yaml")] = str(tmp_path / "prices.yaml")
    proc = _estimate(*args)
    assert proc.returncode == 0, proc.stderr
    printed = {" ".join(x.split()) for x in proc.stdout.splitlines()}
    assert len(shown) >= 8
    assert [x for x in shown if " ".join(x.split()) not in printed] == []


def test_the_wall_time_under_a_rate_limit_is_its_largest_bound():
    """requests / RPM and tokens / TPM join the chain and the streams; the largest binds."""
    raw = paper_like()
    raw["llm"] = {**raw["llm"], "rate_limit": {"requests_per_minute": 600, "share": 0.25}}
    cfg = load_config(raw)
    rates = estimate.priors(cfg)
    lines = estimate.predict(cfg, rates)
    limited = estimate.wall_time(cfg, lines, latency_s=1.0, llm_slots=16)
    mini = sum(x.calls for x in lines if x.model == cfg.llm.model)  # Mem-T-4B is not limited
    # The whole run's limit, not this machine's share of it.
    assert limited.requests_s == pytest.approx(mini / 600 * 60)
    assert limited.binding == "requests per minute" and limited.seconds == limited.requests_s
    raw["llm"]["rate_limit"] = {"tokens_per_minute": 100_000}
    cfg = load_config(raw)
    tpm = estimate.wall_time(cfg, lines, latency_s=1.0, llm_slots=16)
    tokens = sum(
        (x.prompt_tokens or 0) + (x.completion_tokens or 0)
        for x in lines
        if x.model == cfg.llm.model
    )
    assert tpm.tokens_s == pytest.approx(tokens / 100_000 * 60) and tpm.requests_s == 0
    assert tpm.binding == "tokens per minute"
    raw["llm"].pop("rate_limit")
    free = estimate.wall_time(load_config(raw), lines, latency_s=1.0, llm_slots=16)
    assert free.requests_s == free.tokens_s == 0
    assert free.seconds == max(free.chain_s, free.streams_s)


def test_a_rollout_holds_its_slot_for_one_call_at_a_time_and_a_served_model_is_its_own():
    """A rollout's turns are sequential, so a slot held by one carries a single call, not
    llm.concurrency: the slots bound is at least the rollouts' calls over the slots. Mem-T's
    writer calls go to its own server, at that server's pace."""
    memt = {"endpoint": "http://127.0.0.1:2/v1"}
    cfg = load_config(paper_like(systems=["nomem", "amem", "memt"], memt=memt))
    lines = estimate.predict(cfg, estimate.priors(cfg))
    turns = sum(x.calls for x in lines if x.role in ("assistant", "simulator"))
    hosted = estimate.wall_time(cfg, lines, latency_s=1.0, llm_slots=16)
    assert hosted.streams_s > turns / 16 > sum(x.calls for x in lines) / (16 * 4)
    quick = estimate.wall_time(cfg, lines, latency_s=1.0, llm_slots=16, served_latency_s=0.0)
    (memt_writer,) = [x for x in lines if x.system == "memt" and x.role == "writer"]
    assert hosted.streams_s - quick.streams_s == pytest.approx(memt_writer.calls / 16)
    assert quick.chain_s < hosted.chain_s and quick.provider_calls == hosted.provider_calls
    # One user's chain: the tasks written one by one, then the longest rollout, turn by turn.
    per_user = {(x.system, x.role): x.calls / cfg.n_users for x in lines}
    tasks = sum(per_user[("(per user)", r)] for r in ("generator", "task_writer", "critic"))
    amem = sum(per_user[("amem", r)] for r in ("assistant", "simulator", "writer"))
    rounds = -(-cfg.n_dims // cfg.llm.concurrency)  # slot-fill, judge, Stage 1, Stage 2
    assert quick.chain_s == pytest.approx(tasks + amem + 4 * rounds)  # amem: the longest
    assert hosted.provider_calls == sum(x.calls for x in lines) - memt_writer.calls


def test_the_local_backend_waits_for_its_servers_slots_at_the_local_models_pace():
    """The offline default: no more calls in flight than the llama.cpp server has slots, and
    without a ledger the local 0.5B model's seconds per call, not a hosted model's."""
    cfg = load_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    assert cfg.llm.backend == "local"
    # 4 server slots: 2 jobs' conversations (the workflow holds the other jobs back).
    assert estimate.streams(cfg, llm_slots=8) == cfg.llm.local.jobs_at_once == 2
    assert estimate.assumed_latency(cfg) == estimate.ASSUMED_LOCAL_LATENCY_S
    rates = estimate.priors(cfg)
    lines = estimate.predict(cfg, rates)
    wall = estimate.wall_time(cfg, lines, estimate.assumed_latency(cfg), llm_slots=8)
    calls = sum(x.calls for x in lines)
    assert wall.streams_s == pytest.approx(calls * estimate.ASSUMED_LOCAL_LATENCY_S / 2)
    hosted = load_config(paper_like())
    assert estimate.streams(hosted, llm_slots=8) == 8 * hosted.llm.concurrency
    assert estimate.assumed_latency(hosted) == estimate.ASSUMED_LATENCY_S


# -- rollout.replay: the recorded run's conversations, no conversation calls ------------------
def test_a_replay_pays_no_conversation_and_takes_the_recorded_turns():
    from memprobe.release import importer
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
    rates = estimate.replayed_turns(cfg, estimate.priors(cfg), "longctx_full", None)
    assert set(rates.turns_per_episode.values()) == {77.7 / 31}
    assert "turns: longctx_full's prior" in rates.source
    calls = estimate.protocol_calls(cfg, rates)
    before = estimate.protocol_calls(live, estimate.priors(live))
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
    assert importer.recorded_turns(small) == 36 / 24
    counted = estimate.replayed_turns(small, estimate.priors(small), "longctx_full", 36 / 24)
    assert set(counted.turns_per_episode.values()) == {36 / 24}
    assert "counted in longctx_full_pooled_50's recorded episodes" in counted.source
    # files not all at hand (more users than the fixture holds): the prior
    assert importer.recorded_turns(cfg) is None
    assert importer.recorded_system("memt_memonly_pooled_50") == "memt"
    assert importer.recorded_system("longctx_full_pooled_50") == "longctx_full"
    # a live run is left alone
    assert estimate.replayed_turns(live, estimate.priors(live), "x", 1.0).turns_per_episode == (
        estimate.priors(live).turns_per_episode
    )


def test_cli_prices_a_replayed_50_user_run_next_to_the_full_run(tmp_path):
    from tests.helpers.release_fixture import FIXTURE

    prices = tmp_path / "prices.yaml"
    prices.write_text("gpt-5.4-mini: {input: 0.25, output: 2.0}\n")
    common = ["--no-ledger", "--prices", str(prices), "--latency", "4", "--llm-slots", "16"]
    full = _estimate("--configfile", "config/paper.yaml", *common)
    replay = _estimate(
        "--configfile", "config/paper.yaml", "config/replay.yaml",
        "--config", f"release_dir={FIXTURE}", *common,
    )  # fmt: skip
    assert full.returncode == 0 and replay.returncode == 0, replay.stderr

    def summary(out: str) -> tuple[int, float, dict[tuple[str, str], int]]:
        lines = out.splitlines()
        total = int(next(x for x in lines if x.startswith("total")).split()[1])
        usd = float(next(x for x in lines if "USD for the priced" in x).split()[0].replace(",", ""))
        calls = {}
        for x in lines:
            parts = x.split()
            if len(parts) > 3 and parts[1] in ("assistant", "simulator", "preference", "writer"):
                calls[(parts[0], parts[1])] = int(parts[3])
        return total, usd, calls

    f_total, f_usd, f_calls = summary(full.stdout)
    r_total, r_usd, r_calls = summary(replay.stdout)
    assert "conversations: replay of longctx_full_pooled_50" in replay.stdout
    assert "(a replay: the paper's rows include the conversation calls" in replay.stdout
    assert "(a replay:" not in full.stdout
    assert all(n == 0 for (s, role), n in r_calls.items() if role != "writer")
    assert all(f_calls[(s, "assistant")] > 0 for s in ("nomem", "amem", "memt"))
    assert r_calls[("amem", "writer")] == pytest.approx(f_calls[("amem", "writer")], rel=0.01)
    assert r_total < 0.6 * f_total and r_usd < 0.5 * f_usd


def test_the_judge_form_and_calibration_source_set_the_judges_calls():
    def judge_calls(**judge) -> dict[str, float]:
        cfg = load_config(paper_like(judge=judge, release_dir=str(ROOT / "tests")))
        lines = estimate.predict(cfg, estimate.priors(cfg))
        return {x.system: x.calls for x in lines if x.role == "judge"}

    llm = judge_calls()
    assert llm["(per run)"] == 47 and llm["longctx_full"] > 0  # one call per anchor
    assert judge_calls(calibration={"source": "release", "n": 100})["(per run)"] == 100
    assert not any(judge_calls(form="scorer").values())  # the offline judge calls no LLM
