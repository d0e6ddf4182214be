"""benchmarks/RESULTS.md's records section is made from benchmarks/results/*.json by
benchmarks/results_md.py, never by hand."""

from __future__ import annotations

import importlib.util
import json
import sys

from tests.helpers.workflow import ROOT


def _module(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


results_md = _module("results_md")
bench_record = sys.modules["bench_record"]


def record(name: str, **fields) -> dict:
    base = {
        "name": name,
        "executor": "local",
        "users": 50,
        "systems": ["nomem", "longctx_full", "amem", "mem0"],
        "rpm": 1500,
        "wall_s": 1500.0,
        "bound_s": None,
        "window_s": 1200.0,
        "admitted_per_min": 1440.0,
        "share_429": 0.004,
        "calls_lost": 0,
        "cpu_ms_per_paid_call": 27.3,
        "peak_rss_mib": 2048,
        "commit": "abc123",
        "command": f"python benchmarks/rate_limit_bench.py --name {name}",
        "machine": {"cpus": 2, "load_average_at_end": 1.9, "date_utc": "2026-12-07 10:00"},
    }
    return {**base, **fields}


def test_each_record_is_a_row_of_its_own_figures(tmp_path):
    results = tmp_path / "results"
    bench_record.write(record("paper-50u"), results)
    bench_record.write(
        record(
            "slurm-10u",
            executor="slurm",
            users=10,
            rpm=1000,
            wall_s=1150.0,
            bound_s=1000.0,
            window_s=None,
            admitted_per_min=870.0,
            share_429=0.0,
            cpu_ms_per_paid_call=None,
            note="Through the one-host SLURM.",
        ),
        results,
    )
    md = tmp_path / "RESULTS.md"
    md.write_text("# Benchmark results\n\nThe history, by hand.\n", encoding="utf-8")

    assert results_md.main(["--results", str(results), "--md", str(md), "--check"]) == 1
    assert results_md.main(["--results", str(results), "--md", str(md)]) == 0
    text = md.read_text(encoding="utf-8")
    rows = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| `")}
    assert (
        "| 50 × 4 | 1,500 | 1,500 | – | 20.0 | 1,440 (96%) | 0.40% | 0 | 27.3 |"
        in rows["| `paper-50u`"]
    )
    assert (
        "| slurm | 10 × 4 | 1,000 | 1,150 | 1.15× | – | 870 (87%) | 0.00% | 0 | – |"
        in rows["| `slurm-10u`"]
    )
    assert "Through the one-host SLURM." in text
    assert "`python benchmarks/rate_limit_bench.py --name slurm-10u`" in text
    assert text.startswith("# Benchmark results\n\n" + results_md.BEGIN)
    assert text.endswith("The history, by hand.\n")  # the prose below is kept

    # a new record, or a hand edit of a figure, makes the section stale until it is made again
    assert results_md.main(["--results", str(results), "--md", str(md), "--check"]) == 0
    md.write_text(text.replace("27.3", "12.0"), encoding="utf-8")
    assert results_md.main(["--results", str(results), "--md", str(md), "--check"]) == 1
    assert results_md.main(["--results", str(results), "--md", str(md)]) == 0
    assert md.read_text(encoding="utf-8") == text


def test_a_record_without_a_field_stops_with_its_file(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    bad = record("half")
    del bad["calls_lost"]
    (results / "half.json").write_text(json.dumps(bad), encoding="utf-8")
    md = tmp_path / "RESULTS.md"
    md.write_text("# Benchmark results\n\n", encoding="utf-8")
    assert results_md.main(["--results", str(results), "--md", str(md)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"results_md: {results / 'half.json'}: missing field(s) calls_lost"
    assert md.read_text(encoding="utf-8") == "# Benchmark results\n\n"


def test_the_repositorys_results_md_is_made_from_its_records():
    assert results_md.main(["--check"]) == 0, "run python benchmarks/results_md.py"
