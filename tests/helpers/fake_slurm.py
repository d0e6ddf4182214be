#!/usr/bin/env python
"""A fake SLURM for tests: one script, installed under the names of the SLURM tools.

State lives in ``$FAKE_SLURM_DIR``:
- ``sbatch.jsonl``: one line per submission, ``{"id", "argv"}``;
- ``jobs/<id>.json``: ``{"id", "name", "comment", "start", "end", "rc"}`` written by the
  background runner that executes the job's ``--wrap`` command locally.

sbatch prints the job id (``--parsable``) and returns at once; sacct reports RUNNING until the
runner has written ``end``, then COMPLETED or FAILED; srun runs its command in place;
sacctmgr/sshare list the account ``memprobe``; ``scontrol show config`` reports a cluster with
accounting (``FAKE_SLURM_ACCOUNTING``, default ``accounting_storage/slurmdbd``) and
``FAKE_SLURM_MIN_JOB_AGE`` (default 300). Every call is logged to ``calls.jsonl``.

What it is for: what the real one-machine SLURM of .ci/local-slurm (no accounting, MinJobAge
600) cannot show without reconfiguring a cluster other tests share: a cluster with accounting,
whose job states sacct reads, and one whose MinJobAge is too short for squeue
(tests/runs/test_cluster.py). Everything else runs on the real one (tests/runs/test_slurm.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_SLURM_DIR", "/tmp/fake-slurm"))


def _opt(argv: list[str], *names: str) -> str | None:
    for i, a in enumerate(argv):
        for n in names:
            if a == n and i + 1 < len(argv):
                return argv[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def _next_id() -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "counter", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        n = int(fh.read() or "1000") + 1
        fh.seek(0)
        fh.truncate()
        fh.write(str(n))
    return n


def _write(path: Path, record: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)


def sbatch(argv: list[str]) -> int:
    job_id = _next_id()
    with open(STATE / "sbatch.jsonl", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(json.dumps({"id": job_id, "argv": argv}) + "\n")
    wrap = _opt(argv, "--wrap")
    if wrap is None:
        print("fake sbatch: only --wrap submissions are supported", file=sys.stderr)
        return 1
    record = {
        "id": job_id,
        "name": _opt(argv, "--job-name", "-J"),
        "comment": _opt(argv, "--comment"),
        "output": (_opt(argv, "--output", "-o") or "slurm-%j.log").replace("%j", str(job_id)),
        "cwd": _opt(argv, "--chdir", "-D") or os.getcwd(),
        "wrap": wrap,
    }
    (STATE / "jobs").mkdir(exist_ok=True)
    _write(STATE / "jobs" / f"{job_id}.json", record)
    # The runner outlives this sbatch call, like a queued job outlives its submission.
    subprocess.Popen(
        [sys.executable, __file__, "--run", str(job_id)],
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    print(job_id)
    return 0


def run(job_id: str) -> int:
    path = STATE / "jobs" / f"{job_id}.json"
    record = json.loads(path.read_text())
    record["start"] = time.time()
    _write(path, record)
    Path(record["output"]).parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SLURM_JOB_ID": str(job_id), "SLURM_JOBID": str(job_id)}
    with open(record["output"], "w") as log:
        rc = subprocess.call(
            ["sh", "-c", record["wrap"]], cwd=record["cwd"], env=env, stdout=log, stderr=log
        )
    record.update(end=time.time(), rc=rc)
    _write(path, record)
    return 0


def sacct(argv: list[str]) -> int:
    name = _opt(argv, "--name")
    if name is None:  # e.g. the account guess (sacct -nu USER -o Account)
        return 0
    for f in sorted((STATE / "jobs").glob("*.json")):
        r = json.loads(f.read_text())
        if r.get("name") != name:
            continue
        if "end" in r:
            state = "COMPLETED" if r["rc"] == 0 else "FAILED"
        else:
            state = "RUNNING" if "start" in r else "PENDING"
        print(f"{r['id']}|{state}")
    return 0


def srun(argv: list[str]) -> int:
    rest = list(argv)
    while rest and rest[0].startswith("-"):
        rest.pop(0)
    if not rest:
        return 0
    os.execvp(rest[0], rest)
    return 1


def main() -> int:
    tool = os.environ.pop("FAKE_SLURM_TOOL", "") or Path(sys.argv[0]).name
    argv = sys.argv[1:]
    if argv[:1] == ["--run"]:
        return run(argv[1])
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "calls.jsonl", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write(json.dumps({"tool": tool, "argv": argv}) + "\n")
    if tool == "sbatch":
        return sbatch(argv)
    if tool == "sacct":
        return sacct(argv)
    if tool == "srun":
        return srun(argv)
    if tool in ("sacctmgr", "sshare"):
        print("memprobe")
        return 0
    if tool == "scontrol":
        accounting = os.environ.get("FAKE_SLURM_ACCOUNTING", "accounting_storage/slurmdbd")
        print(f"AccountingStorageType   = {accounting}")
        print(f"MinJobAge               = {os.environ.get('FAKE_SLURM_MIN_JOB_AGE', '300')} sec")
        return 0
    if tool == "sinfo":
        print("PARTITION\ncpu*\ngpu")
        return 0
    if tool == "scancel":
        with open(STATE / "scancel.log", "a") as fh:
            fh.write(" ".join(argv) + "\n")
        return 0
    return 0  # squeue and anything else: nothing to report


if __name__ == "__main__":
    sys.exit(main())
