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


def calls(rule: str, role: str, n: int) -> list[dict[str, str]]:
    """Ledger rows of ``n`` calls of ``role`` in a job of ``rule``: each a handed reply (ok,
    reask 0), and a resampled invalid reply and a re-ask, which are not calls of their own."""
    row = {"job": f"{rule}/user_001", "role": role}
    rows = [{**row, "status": "ok", "reask": "0"} for _ in range(n)]
    return [*rows, {**row, "status": "invalid", "reask": "0"},
            {**row, "status": "ok", "reask": "1"}]  # fmt: skip


def test_a_stage_past_its_share_of_stand_ins_stops_in_one_line_naming_it():
    """Issue 42 item 4: an endpoint whose every reply was invalid yielded a full set of tables
    made of stand-ins; past llm.max_stand_in_share of a stage's calls the run stops."""
    jobs = [
        JobStandIns(job="slotfill/a", rule="slotfill", recoveries=[rec("slotfill", "B")] * 4),
        JobStandIns(job="bank/u", rule="bank", recoveries=[rec("bank")]),
        JobStandIns(job="attribution/u", rule="attribution", recoveries=[rec("subclass")]),
    ]
    rows = [*calls("slotfill", "slotfill", 4), *calls("bank", "generator", 10)]
    rows += [*calls("persona", "generator", 1), *calls("attribution", "disclosure", 2)]
    assert stand_in_log.shares(jobs, rows) == {
        "bank": (1, 10),  # the generator's calls in the bank's jobs, not the persona's
        "slotfill": (4, 4),
        "subclass": (1, 2),  # the disclosure role's second question
    }
    with pytest.raises(stand_in_log.TooManyStandIns) as err:
        stand_in_log.check_share(jobs, rows, 0.5, "listed in results/recoveries/")
    line = str(err.value)
    assert line == (
        "llm.max_stand_in_share: more than 0.5 of a stage's calls ended in a stand-in "
        "(slotfill 4 of 4 calls, 100%): the endpoint's replies are mostly invalid, so no "
        "table is written (nor recoveries.csv); each stand-in is listed in results/recoveries/"
    )
    # A share at the limit runs on; a stage with more stand-ins than rows counts them all.
    stand_in_log.check_share(jobs[1:], rows, 0.5, "")
    assert stand_in_log.shares(jobs[:1], []) == {"slotfill": (4, 4)}
    # A few stand-ins, as a small model's run has, run on; 1 never stops.
    stand_in_log.check_share(jobs[:1], calls("slotfill", "slotfill", 40), 0.5, "")
    stand_in_log.check_share(jobs, rows, 1.0, "")
