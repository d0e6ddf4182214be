"""A rule's script run as Snakemake runs it (``PYTHON scripts/<rule>.py RULE LOG USAGE JOB``),
in this process: the job's files, its config file, its usage ledger and its recoveries file.

The scripts end in ``step.run(main)``, which reads the command line, sets up logging, runs the
job and exits 1 on a known error: ``ScriptJob.run`` returns that exit status.
"""

from __future__ import annotations

import json
import logging
import runpy
import sys
from pathlib import Path
from typing import Any

from memprobe.config.loading import load_config
from memprobe.spec import records, stand_in_log
from memprobe.workflow import shell_job
from tests.helpers.workflow import ROOT, tiny_config


class ScriptJob:
    """One job of ``rule`` against the endpoint at ``base_url``; ``llm``: llm settings,
    ``config``: other keys of the run's config."""

    def __init__(
        self,
        tmp_path: Path,
        monkeypatch,
        rule: str,
        base_url: str,
        *,
        config: dict[str, Any] | None = None,
        **llm: Any,
    ):
        self.tmp = tmp_path
        self.rule = rule
        raw = tiny_config(base_url) | (config or {})
        raw["results_dir"] = str(tmp_path / "results")
        raw["llm"].update(cache_dir=str(tmp_path / "cache"), **llm)
        self.config = raw
        # As the Snakefile exports it: the run's validated config (shell_job.export_config).
        config_file = tmp_path / "config.json"
        config_file.write_text(json.dumps(load_config(raw).model_dump(mode="json")))
        monkeypatch.setenv(shell_job.CONFIG_ENV, str(config_file))
        monkeypatch.setenv("MEMPROBE_TEST_KEY", "test-key")

    def file(self, name: str, record: Any) -> str:
        """An input file holding ``record`` (a record, or a path kept as is)."""
        if isinstance(record, str):
            return record
        path = self.tmp / "in" / f"{name}.json"
        records.write_atomic(path, record)
        return str(path)

    def usage(self, wildcards: dict[str, str]) -> Path:
        tag = "_".join(wildcards.values()) or "all"
        return self.tmp / "results" / "usage" / self.rule / f"{tag}.csv"

    def recoveries(self, wildcards: dict[str, str]) -> stand_in_log.JobStandIns | None:
        found = stand_in_log.read([stand_in_log.path_for(self.usage(wildcards))])
        return found[0] if found else None

    def run(
        self,
        inputs: dict[str, Any],
        outputs: dict[str, str],
        wildcards: dict[str, str],
        script: str | None = None,
    ) -> int:
        files = {k: self.file(k, v) for k, v in inputs.items()}
        outs = {k: str(self.tmp / "out" / v) for k, v in outputs.items()}
        spec = json.dumps(
            {
                "input": {"all": list(files.values()), "names": files},
                "output": {"all": list(outs.values()), "names": outs},
                "wildcards": wildcards,
                "params": {},
            }
        )
        log = self.tmp / "logs" / f"{self.rule}.log"
        path = str(ROOT / "scripts" / f"{script or self.rule}.py")
        argv, root = sys.argv, logging.getLogger()
        handlers, level = list(root.handlers), root.level
        sys.argv = [path, self.rule, str(log), str(self.usage(wildcards)), spec]
        try:
            runpy.run_path(path, run_name="__main__")
            return 0
        except SystemExit as exit_:
            return int(exit_.code or 0) if not isinstance(exit_.code, str) else 1
        finally:
            sys.argv = argv
            for h in root.handlers:
                if h not in handlers:
                    h.close()
            root.handlers[:] = handlers
            root.setLevel(level)

    def out(self, name: str) -> Path:
        return self.tmp / "out" / name
