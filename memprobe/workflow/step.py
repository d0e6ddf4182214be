"""What every Snakemake script shares: config, logging, LLM clients, clean failures.

A script ends with ``step.run(main)``; ``main`` gets a ``Job``. Known errors (bad config, bad
input file, an endpoint that stopped answering) become one line on stderr and in the job log,
exit status 1, and Snakemake removes the job's outputs, so no partial artifact survives. A
failure on an LLM call also moves the job to its next attempt (memprobe/workflow/attempts.py),
so running it again draws new samples where it failed. A finished job writes the stand-ins
it used (memprobe/spec/stand_in_log.py) for the run's last lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memprobe.config.base import ConfigError
from memprobe.config.schema import Config
from memprobe.llm import ledger
from memprobe.llm.client import ATTEMPT_STRIDE, LLM, LLMError, client_for
from memprobe.spec import stand_in_log
from memprobe.spec.prompts import PromptError
from memprobe.spec.records import RecordError, StandIn
from memprobe.spec.taxonomy import TaxonomyError
from memprobe.workflow import attempts, job_env
from memprobe.workflow.config_slices import JobConfig, job_keys, job_roles
from memprobe.workflow.shell_job import run_config

if TYPE_CHECKING:
    from memprobe.agents.base import MemorySystem

BY_HAND_ENV = "MEMPROBE_JOB_BY_HAND"  # set by memprobe job (memprobe/workflow/job.py)
KNOWN_ERRORS = (ConfigError, LLMError, RecordError, PromptError, TaxonomyError, ValueError)
log = logging.getLogger("memprobe")


class Job:
    """The job a script's ``main`` gets: Snakemake's job (the ``snakemake`` object of a
    ``script:`` rule, or ``shell_job.SpecJob`` under ``shell:``) with its validated config,
    its LLM clients and memory system, and the life of its usage ledger."""

    def __init__(self, smk: Any) -> None:
        self.smk = smk
        self.input = smk.input
        self.output = smk.output
        self.wildcards = smk.wildcards
        self.rule = smk.rule
        # The run's config as this job may read it: its rule's slice, which is its params, and
        # the keys no slice needs (config_slices.JobConfig); any other key is an error.
        wildcards = dict(smk.wildcards.items())
        self.roles = job_roles(smk.rule, wildcards)
        data = run_config()
        self.cfg: Config = cast(Config, JobConfig(smk.rule, data, job_keys(smk.rule, wildcards)))
        # No key its own calls do not use (memprobe/workflow/job_env.py).
        job_env.withhold(Config.model_validate(data), smk.rule, self.roles, wildcards)
        tag = "_".join(f"{v}" for v in dict(smk.wildcards).values()) or "all"
        self.name = f"{smk.rule}/{tag}"
        # The usage ledger is the job's `usage` log (rules/common.smk: usage_log). Snakemake
        # deletes a job's logs before each attempt, so calls are first recorded in a pending
        # file that becomes the ledger when the job succeeds: what a killed or failed attempt
        # paid (and the next attempt replays from the cache) stays on the bill.
        usage = getattr(smk.log, "usage", None)
        self.ledger_path = Path(usage) if usage else None
        # Attempts count for a job that calls an LLM (whose slice holds the seed) only.
        self.attempt = attempts.current(*self._attempt_key) if self.roles else 0
        # Stand-ins that no JSON output lists (a script whose outputs are tables).
        self.stand_ins: list[StandIn] = []
        # Run by hand (memprobe job): the rows and keys of the bill it started from.
        self.by_hand = os.environ.get(BY_HAND_ENV) == "1"
        self.billed: tuple[int, set[str]] | None = None

    @property
    def _attempt_key(self) -> tuple[str, str, int, str]:
        # The ledger's path names the job's own folder: the run's, or the shared users' one
        # (docs/runs.md), so one run's failed job moves no other run's samples.
        return (self.cfg.llm.cache_dir, self.name, self.cfg.seed, str(self.ledger_path))

    def next_attempt(self) -> int:
        """This attempt failed on an LLM call: the next run of the job draws new samples."""
        return attempts.bump(*self._attempt_key)

    @property
    def stand_ins_path(self) -> Path | None:
        return stand_in_log.path_for(self.ledger_path) if self.ledger_path else None

    @property
    def pending_ledger(self) -> Path | None:
        path = self.ledger_path
        return path.with_name(path.name + ".partial") if path else None

    def llm(self, role: str) -> LLM:
        if role not in self.roles:
            raise ConfigError(
                f"rule {self.rule} calls role {role}, which is not in its slice: add it to "
                f"SLICES[{self.rule!r}] in memprobe/workflow/config_slices.py"
            )
        if self.pending_ledger is None:
            raise ConfigError(f"rule {self.rule}: calls an LLM but declares no `usage` log")
        return client_for(
            role, self.cfg, ledger_path=self.pending_ledger, job=self.name, attempt=self.attempt
        )

    def memory_system(self, workdir: Path) -> MemorySystem:
        """The job's memory system (its ``system`` wildcard), its LLM roles and prompt files."""
        from memprobe.registry import systems as registry

        name = self.wildcards.system
        return registry.create(
            name,
            config=self.cfg,
            # A replay's replies are recorded: its system is never asked to reply.
            assistant=self.llm("assistant") if "assistant" in self.roles else None,
            writer=self.llm("writer") if registry.spec(name).llm_writer else None,
            prompts=prompt_inputs(self),
            workdir=workdir,
        )

    @property
    def signature(self) -> str:
        """This job as run now: its rule, wildcards, params (the config slice) and inputs."""
        files = [
            (str(p), st.st_size, st.st_mtime_ns)
            for p in map(Path, self.input)
            if p.is_file() and (st := p.stat())
        ]
        job = [self.name, sorted(dict(self.smk.params).items(), key=str), files]
        return hashlib.sha256(json.dumps(job, default=str).encode()).hexdigest()

    def carry_finished_attempt(self) -> None:
        """Keep the bill of an attempt that finished but was never recorded.

        A kill between the script's end and Snakemake's bookkeeping reruns the job, and
        Snakemake deletes its logs first: the finished attempt's paid rows would vanish while
        the rerun only replays them. Its copy (``.last``) is carried into this attempt's
        pending ledger when the job is the same one (same params and inputs); a job rerun
        because something changed starts a new bill.

        A job run by hand (``memprobe job``) starts from the run's bill as it stands, its
        declared ledger, which nobody deleted: what it replays of that bill is not added to it
        again (``finish``), so the estimate's rates count each of the job's calls once.
        """
        pending, last = self.pending_ledger, self.last_ledger
        if self.by_hand and pending and self.ledger_path and self.ledger_path.exists():
            if not pending.exists():
                shutil.copyfile(self.ledger_path, pending)
        if self.by_hand and pending and pending.exists():
            rows = ledger.read_rows([pending])
            self.billed = (len(rows), {r.get("key", "") for r in rows} - {""})
        if pending is None or last is None or not last.exists():
            return
        sig = last.with_name(last.name + ".sig")
        same = sig.exists() and sig.read_text() == self.signature
        if same and not pending.exists():
            shutil.copyfile(last, pending)
        last.unlink()
        sig.unlink(missing_ok=True)

    @property
    def last_ledger(self) -> Path | None:
        path = self.ledger_path
        return path.with_name(path.name + ".last") if path else None

    def begin(self) -> None:
        """Drop the stand-ins an earlier run of this job recorded; say which attempt this is."""
        if self.stand_ins_path is not None:
            self.stand_ins_path.unlink(missing_ok=True)
        if self.attempt:
            log.info(
                "%s: attempt %d: calls no earlier attempt got a reply for are sampled with a "
                "new seed (+%d)",
                self.name,
                self.attempt,
                ATTEMPT_STRIDE * self.attempt,
            )

    def output_stand_ins(self) -> list[StandIn]:
        """The stand-ins the job's JSON outputs list (records.HasStandIns), in output order."""
        found: list[StandIn] = []
        for path in map(Path, self.output):
            if path.suffix != ".json" or not path.is_file():
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                found += [StandIn.model_validate(r) for r in data.get("recoveries", [])]
        return found

    def finish(self) -> None:
        """The job succeeded: its stand-ins are written for the run's last lines, and its
        pending calls become its declared ledger."""
        if self.stand_ins_path is not None:
            record = stand_in_log.JobStandIns(
                job=self.name,
                rule=self.rule,
                wildcards={k: str(v) for k, v in dict(self.wildcards).items()},
                attempt=self.attempt,
                recoveries=[*self.output_stand_ins(), *self.stand_ins],
            )
            stand_in_log.write(self.stand_ins_path, record)
        pending, last = self.pending_ledger, self.last_ledger
        if self.billed is not None and pending and pending.exists():
            # By hand: the rows after the bill it started from, less its replays of that bill.
            held, keys = self.billed
            rows = ledger.read_rows([pending])
            kept = rows[:held] + [
                r for r in rows[held:] if r.get("cached") != "true" or r.get("key") not in keys
            ]
            ledger.write_rows(pending, kept)
        if self.ledger_path and pending and last and pending.exists():
            shutil.copyfile(pending, last)
            last.with_name(last.name + ".sig").write_text(self.signature)
            os.replace(pending, self.ledger_path)


def prompt_inputs(job: Job) -> dict[str, str]:
    """Named prompt inputs of a rule (``<name>_prompt=...``) as ``{name: path}``."""
    return {
        key.removesuffix("_prompt"): str(value)
        for key, value in dict(job.input.items()).items()
        if key.endswith("_prompt")
    }


# The HTTP clients' loggers: one INFO line per request (``HTTP Request: POST ...``) and the
# openai client's retry notes. They belong in the job's log file, not on the terminal.
WIRE_LOGGERS = ("httpx", "httpx2", "httpcore", "openai")


class NotWire(logging.Filter):
    """Passes a record unless it is an HTTP client's line below WARNING."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.name.split(".")[0] not in WIRE_LOGGERS


def setup_logging(logfile: str | None) -> None:
    """The job's log: everything in ``logfile``; on stderr (the terminal) all but the wire."""
    terminal = logging.StreamHandler(sys.stderr)
    terminal.addFilter(NotWire())
    handlers: list[logging.Handler] = [terminal]
    if logfile:
        Path(logfile).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(logfile, mode="w", encoding="utf-8"))
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(message)s",
        datefmt="%H:%M:%S",
        handlers=handlers,
        force=True,
    )
    for name in WIRE_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


@contextlib.contextmanager
def wire_to(logfile: str) -> Iterator[None]:
    """Inside Snakemake's own process (``onstart``): the HTTP clients' lines go to
    ``logfile`` only, never through Snakemake's handlers to the terminal."""
    Path(logfile).parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(logfile, mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
    loggers = [logging.getLogger(n) for n in WIRE_LOGGERS]
    saved = [(lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False
    try:
        yield
    finally:
        for lg, (level, propagate) in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate
        handler.close()


def run(main: Callable[[Job], None]) -> None:
    """Run a script's ``main``: under ``script:`` Snakemake (or ``memprobe job``'s mock) put
    ``snakemake`` in the script's globals; under ``shell:`` the job comes on the command line
    (memprobe/workflow/shell_job.py)."""
    smk = sys.modules["__main__"].__dict__.get("snakemake")
    if smk is None:
        from memprobe.workflow.shell_job import SpecJob

        if len(sys.argv) != 5:
            sys.exit(f"usage: {sys.argv[0]} RULE LOG USAGE JOB_JSON (run through snakemake)")
        smk = SpecJob(*sys.argv[1:])
    setup_logging(smk.log[0] if len(smk.log) else None)
    job: Job | None = None
    try:
        job = Job(smk)
        job.carry_finished_attempt()
        job.begin()
        main(job)
        job.finish()
    except KNOWN_ERRORS as err:
        if isinstance(err, LLMError) and job is not None:
            nxt = job.next_attempt()
            log.info("%s: the next run of this job is attempt %d (new samples)", job.name, nxt)
        log.error("memprobe: %s: %s", smk.rule, err)
        sys.exit(1)
