"""Each job's stand-ins beside its ledger, and the run's closing lines on them."""

from __future__ import annotations

from pathlib import Path

import pytest

from memprobe.spec import stand_in_log
from memprobe.spec.records import Bank, RecordError, StandIn
from memprobe.spec.stand_in_log import JobStandIns


def rec(stage: str, touches=()) -> StandIn:
    return StandIn(stage=stage, where="w", problem="p", action="a", touches=list(touches))


def test_the_file_sits_where_the_ledger_sits_under_recoveries():
    assert stand_in_log.path_for("results/usage/judge/longctx_full_user_001_dump_all.csv") == (
        Path("results/recoveries/judge/longctx_full_user_001_dump_all.json")
    )


def test_a_job_that_needed_no_stand_in_on_its_first_attempt_leaves_no_file(tmp_path):
    path = tmp_path / "recoveries" / "bank" / "user_001.json"
    stand_in_log.write(
        path, JobStandIns(job="bank/user_001", rule="bank", recoveries=[rec("bank")])
    )
    assert stand_in_log.read([path, tmp_path / "absent.json"])[0].recoveries == [rec("bank")]
    stand_in_log.write(path, JobStandIns(job="bank/user_001", rule="bank"))
    assert not path.exists()


def test_a_broken_file_is_one_line_naming_it(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{")
    with pytest.raises(RecordError, match=r"x.json: not valid JSON"):
        stand_in_log.read([path])


def test_the_closing_lines_name_the_folders_the_files_are_in(tmp_path):
    """A shared users' folder keeps its jobs' files: the run's own folder may have none."""
    users = tmp_path / "users" / "bank-1a2b" / "recoveries" / "bank" / "user_001.json"
    run = tmp_path / "default" / "recoveries" / "judge" / "nomem_user_001.json"
    users.parent.mkdir(parents=True)
    users.write_text("{}")
    assert (
        stand_in_log.listed_in([run, users]) == f"listed in {tmp_path}/users/bank-1a2b/recoveries/"
    )
    run.parent.mkdir(parents=True)
    run.write_text("{}")
    assert stand_in_log.listed_in([users, run]) == (
        f"listed in {tmp_path}/default/recoveries/, {tmp_path}/users/bank-1a2b/recoveries/"
    )
    assert stand_in_log.listed_in([tmp_path / "absent.json"]) == ""


def test_closing_lines_count_per_stage_in_protocol_order_and_name_reruns():
    jobs = [
        JobStandIns(job="judge/a", rule="judge", recoveries=[rec("judge", ["B"])] * 2),
        JobStandIns(job="bank/u", rule="bank", attempt=1, recoveries=[rec("bank")]),
    ]
    first, second = stand_in_log.summary_lines(jobs, "listed in results/recoveries/")
    assert first == (
        "memprobe: 3 stand-ins (re-asks spent, a deterministic stand-in recorded in the "
        "artifact): bank 1, judge 2; 2 touch a number and flag its cells (listed in "
        "results/recoveries/)"
    )
    assert second == "memprobe: 1 job(s) finished on a later attempt: bank/u (attempt 1)"
    assert stand_in_log.summary_lines([]) == ["memprobe: no stand-ins (every reply validated)"]


def test_an_artifact_lists_its_recoveries_last_and_only_when_it_has_some():
    bank = Bank(user_id="u", entries=[])
    assert "recoveries" not in bank.model_dump_json()
    bank.recoveries.append(rec("bank"))
    assert list(bank.model_dump()) == ["user_id", "entries", "recoveries"]
    assert Bank.model_validate_json(bank.model_dump_json()) == bank
