"""bank.pool: release: new banks drawn from the release's dimension_pool.json, read from the
release checkout when the run starts (docs/fidelity.md, "pool")."""

from __future__ import annotations

import json

import pytest

from memprobe.spec.taxonomy import load_pool
from tests.helpers.release_fixture import FIXTURE
from tests.helpers.workflow import tiny_config

POOL_FILE = FIXTURE / "Deeppersona" / "data" / "dimension_pool.json"
USERS = ("user_001", "user_002")
BANKS = [f"results/users/{u}/bank.json" for u in USERS]


@pytest.mark.workflow
def test_a_release_pool_run_draws_every_bank_from_the_release_pool(endpoint, workflow_factory):
    wf = workflow_factory(
        tiny_config(endpoint.base_url, bank={"pool": "release"}, release_dir=str(FIXTURE))
    )
    wf.run(*BANKS)
    release, ours = load_pool(POOL_FILE), load_pool()
    picked = set()
    for path in BANKS:
        entries = json.loads((wf.root / path).read_text())["entries"]
        assert len(entries) == 5  # one per category (tests/configs/tiny.yaml)
        for e in entries:
            assert e["dimension"] in release.names(e["category"]), e
            picked.add(e["dimension"])
    # Some of them our own pool does not have: the banks did not come from it.
    assert picked - {n for c in ours.categories for n in ours.names(c)}


@pytest.mark.workflow
@pytest.mark.parametrize("broken", ["missing", "malformed"])
def test_a_missing_or_malformed_release_pool_stops_the_run_in_one_line(
    broken, endpoint, workflow_factory, tmp_path
):
    release = tmp_path / "release"
    pool = release / "Deeppersona" / "data" / "dimension_pool.json"
    if broken == "malformed":
        pool.parent.mkdir(parents=True)
        pool.write_text('{"meta": {}, "skill_memory": [')
    wf = workflow_factory(
        tiny_config(endpoint.base_url, bank={"pool": "release"}, release_dir=str(release))
    )
    proc = wf.run(*BANKS, check=False)
    lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if ln.startswith("memprobe: ")]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr[-2000:]
    assert str(pool) in lines[0]
    assert ("file not found" if broken == "missing" else "not a JSON dimension pool") in lines[0]
    assert not (wf.root / "results").exists()
