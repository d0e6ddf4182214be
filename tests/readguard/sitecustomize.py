"""Record which workflow files (prompts/, config/) each job process opens for reading.

Put this directory on ``PYTHONPATH`` with ``MEMPROBE_READ_LOG=<file>``: every Python process
appends one JSON line at exit, ``{"rule": ..., "declared": ..., "reads": [...]}``, where
``declared`` is the job's declared inputs (from the ``snakemake`` object of a ``script:`` job or
the job JSON of a ``shell:`` job; null for a process that is not a job) and ``reads`` the
files under ``prompts/`` or ``config/`` it opened, relative to the working directory.
"""

from __future__ import annotations

import atexit
import json
import os
import sys

_LOG = os.environ.get("MEMPROBE_READ_LOG")
_WATCHED = ("prompts", "config")


def _job() -> tuple[str | None, list[str] | None]:
    """The job's rule and declared inputs, or (None, None) for a process that is no job."""
    smk = sys.modules["__main__"].__dict__.get("snakemake")
    if smk is not None:
        return smk.rule, [str(x) for x in smk.input]
    for i, arg in enumerate(sys.argv):
        if arg.startswith("{"):
            try:
                spec = json.loads(arg)
            except ValueError:
                continue
            if isinstance(spec, dict) and "input" in spec:
                return sys.argv[i - 3], list(spec["input"]["all"])  # RULE LOG USAGE JOB_JSON
    return None, None


if _LOG:
    _cwd = os.getcwd()
    _reads: set[str] = set()

    def _hook(event: str, args: tuple) -> None:
        if event != "open" or not isinstance(args[0], str | bytes | os.PathLike):
            return
        mode = args[1] or "r"
        if any(c in str(mode) for c in "wax+"):
            return
        path = os.fsdecode(args[0])
        rel = os.path.relpath(os.path.abspath(path), _cwd)
        if rel.split(os.sep, 1)[0] in _WATCHED:
            _reads.add(rel)

    def _write() -> None:
        rule, declared = _job()
        line = {"rule": rule, "declared": declared, "reads": sorted(_reads)}
        with open(_LOG, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    sys.addaudithook(_hook)
    atexit.register(_write)
