"""compare.runs: other runs found by name at DAG load, each failure one line."""

from __future__ import annotations

import pytest

from memprobe.config.loading import load_config
from memprobe.report.compare import PAPER_JUDGE
from memprobe.spec import records
from memprobe.spec.records import Scored
from memprobe.workflow import compared_runs
from tests.helpers.workflow import tiny_config

PAIRS = [("longctx_full", "dump_all"), ("longctx_full", "retrieve")]
USERS = ["user_001", "user_002"]


def cfg_of(tmp_path, runs):
    raw = tiny_config("http://127.0.0.1:9/v1", results_dir=str(tmp_path), compare={"runs": runs})
    return load_config(raw)


def other_run(tmp_path, name="release", users=("user_001", "user_002", "user_003"), pairs=None):
    """A run's folder as its tables job leaves it: scored.json and the judge records."""
    pairs = pairs or [("nomem", "dump_all"), ("memt", "dump_all"), ("memt", "retrieve")]
    scored = Scored(run=name, users=list(users), pairs=pairs, judge=PAPER_JUDGE)
    records.write_atomic(tmp_path / name / "scored.json", scored)
    for s, m in pairs:
        for u in users:
            records.write_atomic(tmp_path / name / s / u / m / "judge.json", "{}")
    return scored


def find(tmp_path, runs, users=USERS, pairs=PAIRS):
    return compared_runs.find(cfg_of(tmp_path, runs), users, pairs)


def test_a_run_is_found_with_the_users_and_modes_both_score(tmp_path):
    scored = other_run(tmp_path)
    (got,) = find(tmp_path, ["release"])
    assert got.name == "release" and got.scored == scored
    assert got.users == USERS  # not its user_003, which this run does not score
    assert got.pairs == scored.pairs
    assert got.judge_files[:2] == [
        f"{tmp_path}/release/nomem/user_001/dump_all/judge.json",
        f"{tmp_path}/release/nomem/user_002/dump_all/judge.json",
    ]
    assert len(got.judge_files) == 3 * 2
    assert got.param() == {
        "name": "release",
        "scored": f"{tmp_path}/release/scored.json",
        "judges": got.judge_files,
    }
    # a run scoring dump_all only sees the other's dump_all pairs
    (got,) = find(tmp_path, ["release"], pairs=[("longctx_full", "dump_all")])
    assert got.pairs == [("nomem", "dump_all"), ("memt", "dump_all")]
    assert find(tmp_path, []) == []


def one_line(tmp_path, runs, **kw) -> str:
    with pytest.raises(compared_runs.CompareError) as err:
        find(tmp_path, runs, **kw)
    text = str(err.value)
    assert "\n" not in text
    return text


def test_a_run_that_is_not_there_is_one_line_naming_it(tmp_path):
    other_run(tmp_path)
    line = one_line(tmp_path, ["release", "nosuch"])
    assert line == (
        f"compare.runs: no run 'nosuch' here ({tmp_path}/nosuch/ not found; runs with tables: "
        "'release'): build its tables first, or remove it from compare.runs"
    )


def test_a_run_without_its_tables_is_one_line(tmp_path):
    (tmp_path / "half").mkdir()
    assert one_line(tmp_path, ["half"]) == (
        f"compare.runs: 'half': {tmp_path}/half/scored.json not found: build that run's "
        "tables first (snakemake tables with its config)"
    )
    (tmp_path / "half" / "scored.json").write_text('{"run": "half"}')
    assert one_line(tmp_path, ["half"]).startswith(
        f"compare.runs: 'half': {tmp_path}/half/scored.json: users: Field required"
    )


def test_a_run_that_shares_no_user_or_mode_is_one_line(tmp_path):
    other_run(tmp_path, users=[f"user_{i:03d}" for i in range(3, 9)])
    assert one_line(tmp_path, ["release"]) == (
        "compare.runs: 'release' shares no user with this run (it scored "
        "user_003..user_008 (6); this run scores user_001, user_002)"
    )
    other_run(tmp_path, "retrieve_only", pairs=[("memt", "retrieve")])
    line = one_line(tmp_path, ["retrieve_only"], pairs=[("longctx_full", "dump_all")])
    assert line == "compare.runs: 'retrieve_only' scored none of this run's modes (dump_all)"


def test_a_judge_file_gone_from_the_other_run_is_one_line(tmp_path):
    other_run(tmp_path)
    gone = tmp_path / "release" / "memt" / "user_002" / "retrieve" / "judge.json"
    gone.unlink()
    assert one_line(tmp_path, ["release"]) == (
        f"compare.runs: 'release': {gone} not found (its scored.json lists it): rebuild "
        "that run's tables"
    )


def test_at_dag_load_stops_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"^memprobe: compare.runs: no run 'nosuch' here"):
        compared_runs.at_dag_load(cfg_of(tmp_path, ["nosuch"]), USERS, PAIRS)
