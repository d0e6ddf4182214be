"""Checks before any job (memprobe/workflow/preflight.py): keys, Mem-T's files, mem0's models."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from tests.helpers.workflow import ROOT, SNAKEMAKE

BASE = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}


def _remote(**llm) -> dict:
    return {
        **BASE,
        "llm": {"backend": "openai", "base_url": "https://api.example/v1", **llm},
    }


@pytest.mark.workflow
@pytest.mark.parametrize(
    ("base_url", "key_line"),
    [
        # A remote endpoint (a name that never resolves, RFC 2606) without its key: both
        # problems, the key first, in one line.
        ("http://memprobe-preflight.invalid:9/v1", True),
        # A loopback server usually takes no key: only its reachability is checked.
        ("http://127.0.0.2:9/v1", False),
    ],
)
def test_preflight_stops_the_run_before_any_job(tmp_path, base_url, key_line):
    """The Snakefile's onstart: an endpoint that cannot be used ends the run in one line."""
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump(
            {
                "results_dir": str(tmp_path / "results"),
                "llm": {"backend": "openai", "base_url": base_url,
                        "api_key_env": "MEMPROBE_UNSET_KEY"},
            }
        )
    )  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "MEMPROBE_UNSET_KEY"}
    proc = subprocess.run(
        [SNAKEMAKE, "--cores", "1", "--configfile", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode != 0 and not (tmp_path / "results").exists()
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("memprobe:")]
    unset = "memprobe: llm.api_key_env: $MEMPROBE_UNSET_KEY is not set"
    assert line.startswith(unset) is key_line, line
    assert f"{base_url} is unreachable" in line, line
