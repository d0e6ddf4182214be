"""The smoke config with memt through a real SLURM, its wall time next to the local executor's.

    .ci/local-slurm start                      # as root: the one-machine SLURM (docs/cluster.md)
    python benchmarks/slurm_vs_local.py        # what docs/cluster.md reports

In two fresh copies of the workflow (temp dirs, never the checkout's results/), the same config
runs ``snakemake tables`` twice: with the local executor (``--cores 8``) and through
``--executor slurm --workflow-profile profiles/slurm`` as shipped (``--jobs 8``). The config is
tests/configs/tiny.yaml (2 users, 5 targets each, 3 turns, both modes) with systems nomem and
memt; the roles answer from the fake endpoint (``memprobe fake-endpoint``) and Mem-T from its
stand-in (memprobe/testing/memt_standin.py), both on loopback threads of this process. The
tables of the two runs must be the same. Extra arguments go to the SLURM run's command line
(e.g. ``--slurm-init-seconds-before-status-checks 5``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memprobe.testing.memt_standin import StandIn  # noqa: E402
from tests.helpers.endpoint import Endpoint  # noqa: E402
from tests.helpers.workflow import SNAKEMAKE, Workflow, tiny_config  # noqa: E402


def timed(wf: Workflow, *args: str) -> float:
    cmd = [SNAKEMAKE, "tables", "--configfile", str(wf.config_path), *args]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=wf.root, capture_output=True, text=True, env=os.environ)
    if proc.returncode != 0:
        raise SystemExit(f"slurm_vs_local: {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - t0


def tables(wf: Workflow) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(wf.results.glob("*.csv"))}


def main() -> None:
    os.environ.update(HF_HUB_OFFLINE="1", MEM0_TELEMETRY="false")
    endpoint, standin = Endpoint(), StandIn()
    try:
        raw = tiny_config(endpoint.base_url, systems=["nomem", "memt"])
        raw.setdefault("system_settings", {})["memt"] = {
            "endpoint": standin.base_url,
            "gpu_model": "a100",
        }
        with tempfile.TemporaryDirectory(prefix="slurm-vs-local-") as tmp:
            roots = [Path(tmp) / name for name in ("local", "slurm")]
            for root in roots:
                root.mkdir()
            local, cluster = (Workflow(root, raw) for root in roots)
            local_s = timed(local, "--cores", "8")
            slurm_args = ["--executor", "slurm", "--workflow-profile", "profiles/slurm"]
            slurm_s = timed(cluster, *slurm_args, "--jobs", "8", *sys.argv[1:])
            same = tables(local) == tables(cluster)
    finally:
        endpoint.close()
        standin.close()
    print(f"local executor (--cores 8):     {local_s:6.1f} s")
    print(f"SLURM (profiles/slurm, --jobs 8 {' '.join(sys.argv[1:])}): {slurm_s:6.1f} s")
    print(f"ratio {slurm_s / local_s:.1f}x; tables the same: {same}")
    if not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
