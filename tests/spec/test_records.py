"""The typed records and their I/O (memprobe/spec/records.py): unreadable inputs are one line
naming the file, NaN is no score, artifacts follow the umask."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from memprobe.spec import records


@pytest.mark.parametrize("kind", ["latin1", "directory", "deep", "huge-integer"])
def test_unreadable_json_inputs_fail_in_one_line_naming_the_file(tmp_path, kind):
    path = tmp_path / "in.json"
    if kind == "latin1":
        path.write_bytes('{"name": "Jos\xe9"}'.encode("latin-1"))
    elif kind == "directory":
        path.mkdir()
    elif kind == "deep":
        path.write_text("[" * 100_000 + "]" * 100_000)
    else:  # past Python's integer-string limit (4,300 digits)
        path.write_text('{"num_memories": ' + "9" * 5000 + "}")
    with pytest.raises(records.RecordError) as err:
        records.read_json(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_nan_scores_are_refused(tmp_path):
    entry = {f: "x" for f in records.JudgeEntry.model_fields} | {"score": "NaN"}
    path = tmp_path / "judge_entry.json"
    path.write_text(json.dumps(entry).replace('"NaN"', "NaN"))  # json.load reads bare NaN
    with pytest.raises(records.RecordError, match="score"):
        records.load(path, records.JudgeEntry)


def test_artifacts_follow_the_umask(tmp_path):
    records.write_atomic(tmp_path / "a.json", {"x": 1})
    mode = stat.S_IMODE((tmp_path / "a.json").stat().st_mode)
    assert mode == 0o666 & ~records._UMASK


def test_a_write_removes_the_temporaries_of_dead_writers_of_that_file_only(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".a.json.{dead_pid}-x1.tmp"  # a SIGKILL between the write and the rename
    ours = tmp_path / f".a.json.{os.getpid()}-x2.tmp"  # a live writer's (another thread's)
    other = tmp_path / f".b.json.{dead_pid}-x3.tmp"  # another output's: its own rerun sweeps it
    for p in (stale, ours, other):
        p.write_text("{")
    records.write_atomic(tmp_path / "a.json", {"x": 1})
    assert not stale.exists() and ours.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.json", ours.name, other.name])


def test_tasks_follow_their_bank_one_to_one_in_order():
    from tests.helpers.protocol import TWO_ENTRY_BANK

    def task(i: int, dimension: str) -> records.Task:
        return records.Task(
            index=i, task="help me", target_category="skill_memory",
            target_dimension=dimension, target_short="x", status="imported",
        )  # fmt: skip

    dims = [e.dimension for e in TWO_ENTRY_BANK.entries]
    tasks = records.Tasks(user_id="user_001", tasks=[task(1, dims[0]), task(2, dims[1])])
    tasks.check_follows(TWO_ENTRY_BANK, "t.json")
    swapped = records.Tasks(user_id="user_001", tasks=[task(1, dims[1]), task(2, dims[0])])
    with pytest.raises(records.RecordError, match=r"^t\.json: tasks\[0\]\.target_dimension is"):
        swapped.check_follows(TWO_ENTRY_BANK, "t.json")
    with pytest.raises(records.RecordError, match=r"^t\.json: 1 tasks for 2 bank entries$"):
        records.Tasks(user_id="user_001", tasks=[task(1, dims[0])]).check_follows(
            TWO_ENTRY_BANK, "t.json"
        )
