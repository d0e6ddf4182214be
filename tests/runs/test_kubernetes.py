"""The Kubernetes route (profiles/kubernetes): what the real executor plugin would submit.

No cluster here: tests/helpers/fake_kubernetes.py answers the Kubernetes API calls of
snakemake-executor-plugin-kubernetes and records every object it creates. The run uses the real
plugin, the real fs storage provider and the profile as shipped; it submits its first ready jobs
(the rollouts of a release user, imported by a local rule) and is stopped there.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time

import pytest
import yaml

from memprobe.workflow import shell_job
from tests.helpers import fake_kubernetes
from tests.helpers.release_fixture import FIXTURE, release_config
from tests.helpers.workflow import ROOT, SNAKEMAKE

KEY = "sk-test-not-a-real-key-4711"


def _target(job: dict) -> str:
    """The `--target-jobs` of a submitted Job: rule:wildcards."""
    args = job["spec"]["template"]["spec"]["containers"][0]["args"][1]
    return args.split("--target-jobs ")[1].split()[0].strip("'")


@pytest.mark.workflow
def test_pods_get_the_key_through_a_secret_and_only_memt_a_gpu(workflow_factory, tmp_path):
    assert shutil.which("rsync"), "the fs storage provider needs rsync (apt-get install rsync)"
    api = fake_kubernetes.serve(tmp_path)
    port = api.server_address[1]
    # One release user (imported by a local rule), nomem and memt; the endpoints answer HTTP
    # (the stand-in API server), so preflight passes.
    raw = release_config(
        n_users=1,
        systems=["nomem", "memt"],
        release={"import_runs": False},
        release_dir="release",  # relative: inputs are staged through the storage prefix
        llm={"backend": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
             "api_key_env": "MEMPROBE_K8S_KEY"},
        system_settings={"memt": {"endpoint": "http://memt.example:8000/v1"}},
    )  # fmt: skip
    wf = workflow_factory(raw)
    shutil.copytree(FIXTURE, wf.root / "release")
    env = {
        **os.environ,
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "MEMPROBE_K8S_KEY": KEY,
        "PWD": str(wf.root),  # the profile's storage prefix and volume path
    }
    cmd = [SNAKEMAKE, "--executor", "kubernetes", "--workflow-profile", "profiles/kubernetes",
           "--configfile", str(wf.config_path)]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=wf.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            objects = fake_kubernetes.submitted(tmp_path)
            targets = {_target(o["body"]) for o in objects if o["path"].endswith("/jobs")}
            if len([t for t in targets if t.startswith("rollout")]) == 2:
                break
            time.sleep(1)
    finally:
        proc.send_signal(signal.SIGINT)  # as Ctrl-C: the plugin deletes its jobs and Secret
        try:
            log = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            log = proc.communicate()[0]
        api.shutdown()
    objects = fake_kubernetes.submitted(tmp_path)
    jobs = {_target(o["body"]): o["body"] for o in objects if o["path"].endswith("/jobs")}
    assert {"rollout:system=nomem,user=user_001", "rollout:system=memt,user=user_001"} <= set(
        jobs
    ), log[-3000:]

    # Every pod shares one LLM cache: the relative llm.cache_dir is anchored at the storage
    # prefix (the checkout on the shared volume) in the config the jobs read.
    exported = list((wf.root / shell_job.CONFIG_DIR).glob("config-*.json"))
    assert exported
    for path in exported:
        assert json.loads(path.read_text())["llm"]["cache_dir"] == f"{wf.root}/.cache/llm"

    # The key travels in the run's Secret only; each pod reads it from there.
    (secret,) = [o["body"] for o in objects if o["path"].endswith("/secrets")]
    assert base64.b64decode(secret["data"]["memprobe_k8s_key"]).decode() == KEY
    for target, job in jobs.items():
        container = job["spec"]["template"]["spec"]["containers"][0]
        assert KEY not in json.dumps(job), target
        (var,) = [e for e in container["env"] if e["name"] == "MEMPROBE_K8S_KEY"]
        ref = var["valueFrom"]["secretKeyRef"]
        assert ref == {"key": "memprobe_k8s_key", "name": secret["metadata"]["name"]}
        # every pod mounts the shared volume where the storage prefix (the checkout) is
        mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
        assert mounts["memprobe-shared"] == str(wf.root), target
        args = container["args"][1]
        assert "--default-storage-provider 'fs'" in args and str(wf.root) in args
        # only memt's jobs ask for a GPU and the large memory
        requests = container["resources"]["requests"]
        memt = "system=memt" in target
        assert ("nvidia.com/gpu" in requests) == memt, (target, requests)
        assert requests["memory"] == ("16000M" if memt else "4000M"), (target, requests)


@pytest.mark.workflow
def test_paper_dry_run_builds_with_the_kubernetes_profile(workflow_factory):
    """Must-show: the documented command builds its DAG (no cluster, no key needed)."""
    wf = workflow_factory(yaml.safe_load((ROOT / "config" / "paper.yaml").read_text()))
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    proc = subprocess.run(
        [SNAKEMAKE, "-n", "--executor", "kubernetes", "--workflow-profile",
         "profiles/kubernetes", "--configfile", "config/paper.yaml"],
        cwd=wf.root, env={**env, "PWD": str(wf.root)}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "(send to storage)" in out and "rollout" in out
