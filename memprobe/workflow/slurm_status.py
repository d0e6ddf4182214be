"""How the SLURM executor learns that a job finished, on a cluster with or without accounting.

snakemake-executor-plugin-slurm asks ``sacct`` for its jobs' states whenever the ``sacct``
binary exists. On a cluster without an accounting database (``AccountingStorageType=
accounting_storage/none``, common on small and first clusters) ``sacct`` exits with
"Slurm accounting storage is disabled"; the plugin logs that at debug level only and takes
every job for still running, so the run waits in silence while the jobs are long done.
``squeue --states=all`` does see them, for ``MinJobAge`` seconds after each ends.

So at onstart, under the SLURM executor, :func:`settle` reads ``scontrol show config``: without
accounting it switches the plugin to ``squeue`` (as ``--slurm-status-command squeue`` would)
and says so in one line, or, where ``MinJobAge`` is too short for the plugin's checks to see
every job before SLURM forgets it, stops the run in one line naming what would work. With
accounting, or where ``scontrol`` cannot be asked, it leaves the plugin's choice alone.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NO_ACCOUNTING = "accounting_storage/none"
# The plugin's longest wait between two status checks (max_sleep_time in its
# check_active_jobs): a finished job must still be in squeue's list when it looks again.
PLUGIN_MAX_CHECK_GAP_S = 180


class SlurmStatusError(Exception):
    """No status command can see this cluster's jobs finish (one line)."""


@dataclass(frozen=True)
class ClusterConfig:
    accounting: str  # AccountingStorageType
    min_job_age_s: int | None  # MinJobAge: how long squeue lists a finished job


def parse_config(text: str) -> ClusterConfig:
    """The two settings from ``scontrol show config``'s ``Key = value`` lines."""
    values = dict(
        (m.group(1), m.group(2).strip())
        for m in re.finditer(r"^(\w+)\s*=\s*(.*)$", text, flags=re.MULTILINE)
    )
    age = re.match(r"(\d+)", values.get("MinJobAge", ""))
    return ClusterConfig(values.get("AccountingStorageType", ""), int(age[1]) if age else None)


def show_config() -> str | None:
    """``scontrol show config``, or None where no SLURM answers."""
    try:
        proc = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def settle(settings: Any, read: Callable[[], str | None] = show_config) -> str | None:
    """Point the SLURM plugin's ``settings`` at a status command that sees jobs finish.

    Returns the line to print when it changed the command, None when it left it; raises
    :class:`SlurmStatusError` when none can."""
    text = read()
    if text is None:
        return None
    cluster = parse_config(text)
    if cluster.accounting != NO_ACCOUNTING:
        return None  # sacct works (the plugin's default), or the site chose
    # The plugin itself goes back to sacct below 3x its first check's wait.
    first_check = int(getattr(settings, "init_seconds_before_status_checks", None) or 40)
    needed = max(3 * first_check, PLUGIN_MAX_CHECK_GAP_S)
    age = cluster.min_job_age_s
    if age is None or age <= needed:
        raise SlurmStatusError(
            f"this SLURM keeps no job accounting ({NO_ACCOUNTING}), so only squeue sees a job "
            f"finish, and it forgets one MinJobAge={age}s after it ends, before the SLURM "
            f"plugin's next check (up to {needed}s later): ask for MinJobAge above {needed} "
            "in slurm.conf, or for accounting (slurmdbd), which sacct reads"
        )
    if settings.status_command == "squeue":
        return None
    settings.status_command = "squeue"
    return (
        f"this SLURM keeps no job accounting ({NO_ACCOUNTING}): job states come from squeue, "
        f"which lists a finished job for MinJobAge={age}s (as --slurm-status-command squeue)"
    )
