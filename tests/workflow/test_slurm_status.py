"""The SLURM plugin's status command on a cluster with or without accounting
(memprobe/workflow/slurm_status.py; on a real SLURM: tests/runs/test_slurm.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from memprobe.workflow import slurm_status

# `scontrol show config` of the one-machine SLURM of .ci/local-slurm (slurm-wlm 22.05), cut.
NO_ACCOUNTING = """Configuration data as of 2026-12-07T05:10:01
AccountingStorageBackupHost = (null)
AccountingStorageEnforce = none
AccountingStorageType   = accounting_storage/none
ClusterName             = memprobe-local
MinJobAge               = 600 sec
SlurmdTimeout           = 20 sec
"""
WITH_ACCOUNTING = NO_ACCOUNTING.replace("accounting_storage/none", "accounting_storage/slurmdbd")


def plugin(status_command: str = "sacct", init: int = 40) -> SimpleNamespace:
    """The plugin's ExecutorSettings, as far as settle reads and writes them."""
    return SimpleNamespace(status_command=status_command, init_seconds_before_status_checks=init)


def test_the_two_settings_are_read_from_scontrol():
    cluster = slurm_status.parse_config(NO_ACCOUNTING)
    assert cluster == slurm_status.ClusterConfig("accounting_storage/none", 600)
    assert slurm_status.parse_config("") == slurm_status.ClusterConfig("", None)


def test_without_accounting_the_plugin_asks_squeue_and_says_so():
    settings = plugin("sacct")
    line = slurm_status.settle(settings, lambda: NO_ACCOUNTING)
    assert settings.status_command == "squeue"
    assert line == (
        "this SLURM keeps no job accounting (accounting_storage/none): job states come from "
        "squeue, which lists a finished job for MinJobAge=600s (as --slurm-status-command "
        "squeue)"
    )
    # already squeue: nothing to say
    assert slurm_status.settle(settings, lambda: NO_ACCOUNTING) is None


@pytest.mark.parametrize("chosen", ["sacct", "squeue"])
def test_with_accounting_or_no_answer_the_plugins_choice_stands(chosen):
    for read in (lambda: WITH_ACCOUNTING, lambda: None):
        settings = plugin(chosen)
        assert slurm_status.settle(settings, read) is None
        assert settings.status_command == chosen


@pytest.mark.parametrize(
    ("min_job_age", "init", "needed"),
    [("60 sec", 40, 180), ("180 sec", 2, 180), ("250 sec", 100, 300), ("", 40, 180)],
)
def test_a_min_job_age_too_short_for_squeue_is_one_line(min_job_age, init, needed):
    """squeue lists a finished job for MinJobAge; the plugin looks again up to 180 s later (and
    itself goes back to sacct below 3x its first wait): shorter, no command sees every job end."""
    text = NO_ACCOUNTING.replace("600 sec", min_job_age)
    settings = plugin("sacct", init)
    with pytest.raises(slurm_status.SlurmStatusError) as err:
        slurm_status.settle(settings, lambda: text)
    message = str(err.value)
    assert "\n" not in message and f"MinJobAge above {needed}" in message
    assert "slurmdbd" in message and settings.status_command == "sacct"
