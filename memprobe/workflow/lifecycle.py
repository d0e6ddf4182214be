"""The run's start and end, in Snakemake's own process (rules/common.smk's ``onstart``,
``onsuccess`` and ``onerror``).

At the start only what the scheduled jobs use starts (memprobe/workflow/servers.py): building
the inspector or the tables of a finished run starts no server and checks no endpoint. Then,
in order: the key variables, a cluster's rate-limit shares and SLURM's status command
(memprobe/workflow/cluster.py),
the preflight (one line for every problem), the run's embedding server (systems that embed
in-process share one sentence-transformers server in a local run: each job would otherwise
spend 10+ s importing it; jobs on cluster nodes load the model themselves), the backend's own
server (``Backend.start``), the judge's calibration where ``judge.calibration.on_fail: stop``
(a judge that fails it ends the run before any job), and the progress line. At the end the
servers stop first, then the progress summary and the run's last lines say which replies were
stand-ins and what the judge's checks found.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memprobe.config.schema import Config
from memprobe.llm.providers import ProviderError, backend
from memprobe.registry import systems as registry
from memprobe.spec import stand_in_log
from memprobe.spec.records import RecordError
from memprobe.workflow import cluster, preflight, slurm_status
from memprobe.workflow.dag_load import stop
from memprobe.workflow.paths import RunPaths


def say(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass(frozen=True)
class JudgeFiles:
    """The files of the run's judge checks (rules/calibration.smk)."""

    anchors: str  # the calibration anchors
    prompt: str  # the judge's prompt file
    pool: str  # the dimension pool (its axis questions)
    calibration: str  # the calibration's verdict
    degenerate: str  # the slot-only labels' table
    cross_check: str  # the offline judge beside the run's


class Run:
    """One invocation of the workflow: what its start started, for its end to stop."""

    def __init__(self, cfg: Config, paths: RunPaths, key_variables: list[str]) -> None:
        self.cfg = cfg
        self.paths = paths
        self.key_variables = key_variables
        self.embed_server = False
        self.progress: list[Any] = []

    # -- onstart ----------------------------------------------------------------------------
    def start(self, workflow: Any, config: dict[str, Any], judge_files: JudgeFiles) -> None:
        from memprobe.workflow import servers

        cfg = self.cfg
        jobs = ((j.rule.name, dict(j.wildcards.items())) for j in workflow.dag.needrun_jobs())
        needs = servers.needs(cfg, jobs)
        cluster.forget_key_variables(workflow, self.key_variables)
        cluster.share_rate_limit_across_nodes(workflow, config)
        try:
            line = cluster.settle_slurm_status(workflow)
        except slurm_status.SlurmStatusError as err:
            stop(err)
        if line:
            say(f"memprobe: {line}")
        local = getattr(workflow, "local_exec", True)
        if needs.anything:
            try:
                preflight.check(cfg, local_files=local)
            except preflight.PreflightError as err:
                stop(err)
        embeds = any(registry.spec(s).uses_run_embedder(cfg) for s in cfg.systems)
        if needs.embeddings and embeds and not cfg.release.import_runs:
            self.start_embedding(local)
        if needs.served_llm:
            try:
                backend(cfg.llm.backend).start(
                    cfg, self.paths.logs, cluster.jobs_elsewhere(workflow)
                )
            except ProviderError as err:
                stop(err)
        stopping = cfg.judge.calibration.on_fail == "stop"
        if stopping and needs.judging and not cfg.release.import_runs:
            self.calibrate(judge_files)
        self.start_progress(workflow)

    def start_embedding(self, local: bool) -> None:
        """The run's embedding server, or on a cluster the name and token its nodes' servers
        go by (memprobe/serving/node_embed.py: each node's first job that encodes starts one)."""
        from memprobe.serving import embed_service

        if not local:
            if self.cfg.cluster_embedding.server == "node":
                name_node_servers(self.cfg.cluster_embedding.idle_exit_s)
            return
        self.embed_server = True
        try:
            embed_service.start_for_run(f"{self.paths.logs}/embed_server.log")
        except embed_service.Unreachable as err:
            say(f"memprobe: {err}; jobs will load the embedding model")

    def calibrate(self, files: JudgeFiles) -> None:
        """``judge.calibration.on_fail: stop``: the judge's calibration, before any job (the
        calibration job itself then replays the same calls from the response cache)."""
        from memprobe.protocol import calibration
        from memprobe.release import judge_verdicts
        from memprobe.workflow import step

        try:
            with step.wire_to(f"{self.paths.logs}/judge_calibration_onstart.log"):
                pairs = judge_verdicts.calibration_pairs(self.cfg, files.anchors)
                calibration.stop_if_failed(self.cfg, pairs, files.prompt, files.pool)
        except calibration.CalibrationError as err:
            stop(err)

    def start_progress(self, workflow: Any) -> None:
        """The progress line (memprobe/report/progress.py), with its prediction where one can
        be made."""
        from memprobe.report import progress

        shared = sorted(set(self.paths.users.values()))
        # LLM jobs at once: llm_slots, and no more than --cores (each job takes one).
        slots = (cluster.global_resource(workflow, n) for n in ("llm_slots", "_cores"))
        at_once = min((int(n) for n in slots if n), default=1)
        rules = {job.rule.name for job in workflow.dag.jobs}
        try:
            predicted = progress.predict(self.cfg, at_once, shared, rules)
        except (OSError, ValueError, KeyError) as err:
            say(f"memprobe: progress line without an estimate ({err})")
            predicted = None

        def jobs_done() -> tuple[int, int]:
            """(jobs finished, jobs in the run) as Snakemake's own progress counts them."""
            scheduler = getattr(workflow, "scheduler", None)
            dag = getattr(workflow, "dag", None)
            return (scheduler.finished_jobs if scheduler else 0), (len(dag) if dag else 0)

        reporter = progress.Reporter(self.cfg, jobs_done, predicted, shared=shared)
        self.progress.append(reporter.start())

    # -- onsuccess, onerror -----------------------------------------------------------------
    def succeeded(self, workflow: Any, ledgers: list[str], judge_files: JudgeFiles) -> None:
        """The end, and the run's last lines on its judge (rules/calibration.smk's files):
        slot-only labels, the cross-check, a judge that failed its calibration."""
        from memprobe.protocol import calibration

        self.end(workflow, ledgers)
        cross_check = judge_files.cross_check if self.cfg.judge.cross_check else None
        for line in calibration.closing_lines(judge_files.degenerate, cross_check):
            say(line)
        if not self.cfg.release.import_runs:
            calibration.warn_at_end(judge_files.calibration, self.cfg.judge)

    def end(self, workflow: Any, ledgers: list[str]) -> None:
        """Stop what the start started, the servers first (nothing said after may keep them
        running); then the progress summary and the lines on the run's stand-ins."""
        try:
            backend(self.cfg.llm.backend).stop(self.cfg)
        finally:
            if self.embed_server:
                from memprobe.serving import embed_service

                embed_service.stop_for_run()
        while self.progress:
            try:
                self.progress.pop().stop()
            except Exception as err:  # the summary is a courtesy: it never hides the end
                say(f"memprobe: no progress summary ({type(err).__name__}: {err})")
        if not self.cfg.release.import_runs:  # imported runs made no LLM call here
            for line in stand_in_lines(workflow, ledgers):
                say(line)


def name_node_servers(idle_s: float) -> None:
    """Under a cluster executor: the run's name, token and idle time for its nodes' embedding
    servers, in the environment its jobs inherit (sbatch passes it on; never their argv)."""
    import secrets

    from memprobe.serving import embed_service, node_embed

    os.environ[node_embed.NODE_ENV] = secrets.token_hex(8)
    os.environ[embed_service.TOKEN_ENV] = secrets.token_hex(16)
    os.environ[node_embed.IDLE_ENV] = repr(float(idle_s))


def stand_in_lines(workflow: Any, ledgers: list[str]) -> list[str]:
    """The run's closing lines on its stand-ins (memprobe/spec/stand_in_log.py): those of the
    jobs behind this invocation's targets, run now or earlier; ``ledgers``: the default
    target's, where there is no DAG (a dry or aborted run)."""
    try:
        usage = [j.log.usage for j in workflow.dag.jobs if "usage" in j.log.keys()]
    except AttributeError:
        usage = ledgers
    files = [stand_in_log.path_for(Path(p)) for p in usage]
    try:
        jobs = stand_in_log.read(files)
    except RecordError as err:
        return [f"memprobe: stand-ins: {err}"]
    return stand_in_log.summary_lines(jobs, stand_in_log.listed_in(files))
