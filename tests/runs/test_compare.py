"""compare.runs by real Snakemake: the release fixture imported as the run ``release``, then
longctx_full replayed through its recorded conversations in the same checkout against the
loopback endpoint, compared with the import user by user (docs/results.md, "Compared runs")."""

from __future__ import annotations

import base64
import csv
import json
import re
import statistics

import pytest

from memprobe.report import tables
from tests.helpers.release_fixture import REPLAY_RUN, release_config, release_users_config

pytestmark = pytest.mark.workflow

CATEGORIES = {"all", "skill", "knowledge", "episodic", "self", "preference"}


def replay_config(base_url: str, **over) -> dict:
    over = {"compare": {"runs": ["release"]}, **over}
    return release_users_config(
        base_url,
        n_users=2,
        systems=["longctx_full"],
        rollout={"replay": REPLAY_RUN},
        run={"name": "release-replay"},  # as config/replay.yaml
        **over,
    )


def rows_of(path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def judge_scores(results, system, mode, users) -> dict[str, dict]:
    return {u: json.loads((results / system / u / mode / "judge.json").read_text()) for u in users}


def page_data(path) -> dict:
    """The data a page of the inspector renders (its JSON script element)."""
    text = path.read_text(encoding="utf-8")
    found = re.search(r'<script id=data type="application/json">(.*?)</script>', text, re.S)
    assert found, path
    return json.loads(found.group(1))


def report_entries(html: str) -> dict[str, dict]:
    """The report's entries (its embedded ``var results = {...};``) by file name."""
    found = re.search(r"^\s*var results = (\{.*\});\s*$", html, re.MULTILINE)
    assert found, "the report embeds no result entries"
    return {path.rsplit("/", 1)[-1]: e for path, e in json.loads(found.group(1)).items()}


def memprobe_lines(proc) -> list[str]:
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out, out[-3000:]
    return [line for line in out.splitlines() if line.startswith("memprobe:")]


def test_a_replay_next_to_the_release_import_on_the_same_users(endpoint, workflow_factory):
    # The run: the release imported for its first 2 users, longctx_full replayed on them.
    wf = workflow_factory(release_config(n_users=2))
    wf.run("tables")
    release = wf.results
    scored = json.loads((release / "scored.json").read_text())
    assert scored["judge"]["paper"] and scored["calibration"] is None
    assert scored["users"] == ["user_001", "user_002"]

    wf.write_config(replay_config(endpoint.base_url))
    wf.run("tables", "inspector")
    replay = wf.results
    users = ["user_001", "user_002"]

    rows = rows_of(replay / "compare.csv")
    keys = {(r["mode"], r["other_system"]) for r in rows}
    assert keys == {
        ("dump_all", "nomem"),
        ("dump_all", "longctx_full"),
        ("dump_all", "memt"),
        ("retrieve", "longctx_full"),
        ("retrieve", "memt"),
    }
    assert all(r["system"] == "longctx_full" and r["other_run"] == "release" for r in rows)
    assert len(rows) == len(keys) * len(CATEGORIES)
    assert {r["category"] for r in rows} == CATEGORIES
    for r in rows:
        assert r["n_users"] == "2", r
        if r["diff"] and r["ci_low"]:
            assert float(r["ci_low"]) <= float(r["diff"]) <= float(r["ci_high"]), r

    # b and b_other: the two runs' own Table 2 cells (the same 2 users); diff: the mean of the
    # per-user differences, inside its paired bootstrap CI.
    table2 = {r["system"]: r for r in rows_of(replay / "table2.csv")}
    release_table2 = {r["system"]: r for r in rows_of(release / "table2.csv")}
    for mode in ("dump_all", "retrieve"):
        mine = judge_scores(replay, "longctx_full", mode, users)
        theirs = judge_scores(release, "memt", mode, users)
        r = next(
            r
            for r in rows
            if (r["mode"], r["other_system"], r["category"]) == (mode, "memt", "all")
        )
        assert r["b"] == table2["longctx_full"][f"B_{mode}_mean"]
        assert r["b_other"] == release_table2["memt"][f"B_{mode}_mean"]
        want = statistics.fmean(theirs[u]["overall"] for u in users)
        assert float(r["b_other"]) == pytest.approx(want, abs=1e-6)
        diffs = [mine[u]["overall"] - theirs[u]["overall"] for u in users]
        assert float(r["diff"]) == pytest.approx(statistics.fmean(diffs), abs=1e-6)
        low, high = tables.bootstrap_ci(diffs, seed=7)  # tiny.yaml's seed, as paired.csv
        assert (float(r["ci_low"]), float(r["ci_high"])) == pytest.approx((low, high), abs=1e-6)
        # the judges differ (the endpoint's model and our prompt vs the paper's judge)
        assert r["note"].startswith(
            "judges differ (release-replay vs release): model fake-model vs gpt-5.4-mini, prompt "
            "prompts/recovery_judge.md ("
        )
        assert (
            "release-replay's judge not calibrated against the paper's judge (anchors: κ"
            in r["note"]
        )
    memt_dump = next(
        r
        for r in rows
        if (r["mode"], r["other_system"], r["category"]) == ("dump_all", "memt", "all")
    )
    assert "† release memt dump_all: 1 of 2 stores overflowed" in memt_dump["note"]

    png = (replay / "figures" / "compare.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    assert "Compared with release (2 shared users" in (replay / "report_header.rst").read_text()

    # The case page sets the release's label and score beside the replay's.
    page = page_data(replay / "inspect" / "cases" / "user_001_04.html")
    rows_ = {(r["run"], r["system"]): r["cells"] for r in page["compared"]["rows"]}
    assert set(rows_) == {
        ("release-replay", "longctx_full"),
        ("release", "nomem"),
        ("release", "longctx_full"),
        ("release", "memt"),
    }
    recorded = judge_scores(release, "memt", "retrieve", ["user_001"])["user_001"]["details"][4]
    assert recorded["dimension"] == "legal_or_administrative_event"
    assert rows_[("release", "memt")]["retrieve"] == {
        "label": recorded["predicted"],
        "score": recorded["score"],
    }

    # The report carries both, with their captions.
    wf.run("--report", wf.target("report.html"))
    entries = report_entries((replay / "report.html").read_text(errors="replace"))
    assert "Compared runs" in entries["compare.csv"]["caption"]
    data = entries["compare.csv"]["data_uri"].split(";base64,", 1)[1]
    assert base64.b64decode(data) == (replay / "compare.csv").read_bytes()
    assert "compare.png" in entries

    # A rerun of the other run that changes its scores reruns the comparison: the release
    # imported with a budget its memt stores fit (no dagger, their recorded labels scored).
    assert wf.scheduled("tables", "inspector") == {}
    wf.write_config(
        release_config(n_users=2, slotfill={"context_tokens": 100000, "overflow": "flag"})
    )
    wf.run("tables")
    wf.write_config(replay_config(endpoint.base_url))
    assert wf.scheduled("tables", "inspector") == {"tables": 1, "inspector": 1}


def test_a_run_to_compare_with_that_is_not_there_is_one_line(endpoint, workflow_factory):
    wf = workflow_factory(replay_config(endpoint.base_url, compare={"runs": ["release"]}))
    proc = wf.run("tables", "-n", check=False)
    (line,) = memprobe_lines(proc)
    assert proc.returncode != 0
    assert re.fullmatch(
        r"memprobe: compare\.runs: no run 'release' here \(results/release/ not found; runs "
        r"with tables: none\): build its tables first, or remove it from compare\.runs",
        line,
    ), line
    assert not (wf.results / "compare.csv").exists()
