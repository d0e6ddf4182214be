"""``memprobe estimate`` (memprobe/report/estimate.py): the command, its config layers, its
errors in one line, and the documented paper estimate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from memprobe.registry import systems as registry
from tests.helpers.estimate import paper_like
from tests.helpers.workflow import ROOT

CLI = str(Path(sys.executable).with_name("memprobe"))


def _estimate(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, "estimate", *args], cwd=cwd, capture_output=True, text=True)


def _table5(out: str) -> dict[str, float | None]:
    """component -> predicted / paper, from the report's comparison block."""
    rows = {}
    for line in out.split("vs paper Table 5")[1].splitlines()[1:]:
        name, _, pred, _, paper, _, ratio = line.split()
        rows[name] = None if ratio == "-" else float(ratio)
    return rows


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
