"""Rerun precision (issue 9, must-show 3): editing a prompt file schedules exactly its dependents.

One completed tiny run; then for EACH file in prompts/ its content is edited, ``snakemake -n``
lists the jobs it would run, and the file is restored. The expected jobs come from the run's
own DAG (``snakemake --detailed-summary``): the jobs that declare the file as an input plus
everything downstream of them. A prompt no job of this config reads must schedule nothing.
"""

from __future__ import annotations

import pytest

from memprobe.jobdag import Dag
from tests.conftest import tiny_config

pytestmark = pytest.mark.workflow
TARGET = "results/table2.csv"


def test_each_prompt_edit_schedules_exactly_its_dependent_set(endpoint, workflow_factory):
    wf = workflow_factory(tiny_config(endpoint.base_url))
    wf.run(TARGET)
    dag = Dag(wf.run("--detailed-summary", TARGET).stdout)
    assert {"rollout", "slotfill", "judge", "attribution"} <= set(dag.rule.values())

    prompts = sorted((wf.root / "prompts").iterdir())
    assert prompts
    used = 0
    for f in prompts:
        rel = f"prompts/{f.name}"
        want = dict(dag.dependents(rel))
        used += bool(want)
        old = f.read_bytes()
        f.write_bytes(old + b"\n# an edit that changes the content\n")
        try:
            got = wf.scheduled(TARGET)
        finally:
            f.write_bytes(old)
        assert got == want, f"{rel}: scheduled {got}, dependent set {want}"
    # Most prompt files are read by this config's jobs, so the comparison is not vacuous.
    assert used >= len(prompts) // 2
    # Restoring the content (a newer mtime, same bytes) reruns nothing.
    assert wf.scheduled(TARGET) == {}
