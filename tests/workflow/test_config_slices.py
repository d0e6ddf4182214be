"""The config slices (memprobe/workflow/config_slices.py): every key placed, runtime keys in no
slice, role identities without secrets, and usage ledgers that keep what a failed attempt paid."""

from __future__ import annotations

import copy
import csv
import json
import re
import sys
from itertools import product
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from pydantic import BaseModel

from memprobe.config.base import ConfigError
from memprobe.config.loading import load_config, set_dotted
from memprobe.config.schema import Config, block_model
from memprobe.registry import systems as registry
from memprobe.serving import local_model
from memprobe.spec.records import RecordError
from memprobe.workflow import config_slices as cs
from memprobe.workflow import shell_job, step
from tests.helpers.workflow import ROOT, tiny_config

SYSTEMS = ["nomem", "longctx_full", "amem", "mem0", "memt"]


def leaves(model: type[BaseModel], prefix: str = ""):
    for name, field in model.model_fields.items():
        ann = block_model(name) if model is Config else field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from leaves(ann, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}"


def sliced_keys() -> set[str]:
    keys = {cs.LLM_RULE_SEED, cs.SYSTEM_SECTION}
    for s in cs.SLICES.values():
        keys |= set(s.keys) | {k for ks in s.per_mode.values() for k in ks}
    return keys | {k for s in registry.specs().values() for k in s.reads}


def test_every_config_key_is_in_a_slice_or_runtime_or_shape():
    places = {
        "slice": sliced_keys(),
        "runtime": set(cs.runtime_only()),
        "shape": set(cs.SHAPE),
        "role identity": set(cs.role_identity_keys()),
    }

    def where(key: str) -> set[str]:
        found = {
            name
            for name, prefixes in places.items()
            if any(key == p or key.startswith(p + ".") for p in prefixes)
        }
        # A runtime key inside a sliced section (system_settings.memt.vllm_bin) or a backend's
        # block (llm.local.threads) is left out of that section's slice or role identity.
        return {"runtime"} if "runtime" in found else found

    unplaced = [k for k in leaves(Config) if not where(k)]
    assert not unplaced, f"add these keys to memprobe/workflow/config_slices.py: {unplaced}"
    twice = {k: where(k) for k in leaves(Config) if len(where(k)) > 1}
    assert not twice


def test_every_rule_has_a_slice_and_every_slice_a_rule():
    text = "".join(p.read_text() for p in (ROOT / "rules").glob("*.smk"))
    assert set(re.findall(r"^\s*rule (\w+):", text, re.M)) - {"all"} == set(cs.SLICES)
    for rule in re.findall(r'settings\("(\w+)"\)', text):
        assert rule in cs.SLICES


def full_config(**llm) -> dict:
    raw = tiny_config("http://127.0.0.1:9/v1", systems=SYSTEMS)
    raw.setdefault("system_settings", {})["memt"] = {"endpoint": "http://127.0.0.1:9/v1"}
    raw["llm"] |= llm
    return raw


def evaluated(raw: dict, **llm_in_memory) -> dict:
    """Every rule's params as its jobs see them, for each system and mode (``llm_in_memory``:
    ``llm`` keys set on the validated config, past its checks)."""
    cfg = load_config(raw)
    for key, value in llm_in_memory.items():
        setattr(cfg.llm, key, value)
    slicer = cs.Slicer(cfg)
    out = {}
    for rule, system, mode in product(cs.SLICES, SYSTEMS, ("dump_all", "retrieve")):
        wc = SimpleNamespace(system=system, mode=mode)
        params = slicer.params(rule)
        out[rule, system, mode] = {k: v(wc) if callable(v) else v for k, v in params.items()}
    return out


# A changed value for each runtime-only key.
RUNTIME_VALUES = {
    "llm.timeout_s": 33.0,
    "llm.max_attempts": 9,
    "llm.max_reasks": 4,
    "llm.resample_invalid": 5,
    "llm.backoff_s": 0.3,
    "llm.concurrency": 2,
    "llm.cache_dir": "elsewhere",
    "llm.api_key_env": "OTHER_KEY",
    "llm.rate_limit": {"requests_per_minute": 60, "tokens_per_minute": 9000, "share": 0.5},
    "progress": {"interval_s": 5.0, "prices": {"m": {"input": 1.0, "output": 2.0}}},
    "cluster_embedding": {"server": "job", "idle_exit_s": 30.0},
    "llm.local.threads": 3,
    "llm.local.context_tokens": 8192,
    "llm.local.parallel": 3,
    "llm.local.cache_reuse": 0,
    "llm.local.startup_timeout_s": 5.0,
    "llm.local.spin_count": 10000,
    "system_settings.memt.api_key_env": "OTHER_KEY",
    "system_settings.memt.vllm_bin": "/opt/vllm",
    "system_settings.memt.startup_timeout_s": 9.0,
    "system_settings.memt.gpu_model": "a100",
    "system_settings.memt.cpus_per_gpu": 2,
    "system_settings.memt.encode_in_job": True,
}


def test_runtime_only_keys_are_in_no_slice():
    assert set(RUNTIME_VALUES) == set(cs.runtime_only())
    before = evaluated(full_config())
    for key, value in RUNTIME_VALUES.items():
        raw = full_config()
        set_dotted(raw, key, value)
        assert evaluated(raw) == before, key
    # A setting that is read does change a slice (the comparison is not vacuous).
    raw = full_config()
    raw["system_settings"]["memt"]["search_topk"] = 9
    changed = {k[0] for k, v in evaluated(raw).items() if v != before[k]}
    assert changed == {"rollout", "replay", "probe"}


def test_a_role_identity_holds_no_secret(monkeypatch):
    monkeypatch.setenv("MEMPROBE_TEST_KEY", "sk-SENTINEL-0123456789")
    url = "https://user:hunter2@api.example:8443/v1?api-key=sk-query"
    with pytest.raises(ConfigError):  # refused where it is given (tests/config/test_base.py)
        load_config(full_config(base_url=url))
    text = repr(evaluated(full_config(), base_url=url))  # set past the config's checks
    for secret in ("sk-SENTINEL", "hunter2", "sk-query", "user:", "MEMPROBE_TEST_KEY"):
        assert secret not in text
    assert "https://api.example:8443/v1" in text


def test_local_model_identity_is_the_cache_identity_without_reading_the_model(
    monkeypatch, tmp_path
):
    def no_hashing(*_):
        raise AssertionError("the DAG load must not hash the model")

    monkeypatch.setattr(local_model, "sha256_of", no_hashing)
    cfg = load_config(full_config(backend="local", base_url=None))
    pack = local_model.PACKS[cfg.llm.local.package].sha256
    assert cs.role_identity(cfg, "judge")["endpoint"] == f"local-gguf:{pack}"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(64))
    cfg = load_config(full_config(backend="local", base_url=None, local={"model_path": str(gguf)}))
    assert cs.role_identity(cfg, "judge")["endpoint"].startswith("local-gguf:")
    sha = "ab" * 32
    cfg.llm.local.sha256 = sha
    assert cs.role_identity(cfg, "judge")["endpoint"] == f"local-gguf:{sha}"


def run_job(monkeypatch, main) -> int:
    """step.run as a shell job of rule judge with a usage log; returns the exit status.
    Like Snakemake, it deletes the job's logs (the ledger is one) before the attempt."""
    Path("results/usage/judge/user_001.csv").unlink(missing_ok=True)
    spec = json.dumps({"input": {"all": [], "names": {}}, "output": {"all": [], "names": {}},
                       "wildcards": {"user": "user_001"}, "params": {}})  # fmt: skip
    argv = ["judge.py", "judge", "logs/judge.log", "results/usage/judge/user_001.csv", spec]
    monkeypatch.setattr(sys, "argv", argv)
    try:
        step.run(main)
    except SystemExit as exit:
        return int(exit.code or 0)
    return 0


def test_a_failed_attempts_calls_stay_on_the_ledger_of_the_attempt_that_succeeds(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(shell_job.CONFIG_ENV, raising=False)
    shell_job.export_config(
        load_config({"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}})
    )
    ledger = Path("results/usage/judge/user_001.csv")

    def ask(job: step.Job) -> None:
        job.llm("judge").text([{"role": "user", "content": "hello"}])

    def fails(job: step.Job) -> None:
        ask(job)
        raise RecordError("the reply did not fit")

    assert run_job(monkeypatch, fails) == 1
    assert not ledger.exists()  # no ledger for a job that did not finish
    assert run_job(monkeypatch, ask) == 0
    rows = list(csv.DictReader(ledger.open()))
    assert [r["cached"] for r in rows] == ["false", "true"]  # paid once, then replayed
    assert not list(ledger.parent.glob("*.partial"))


def test_a_running_jobs_ledger_is_the_documented_partial_file(tmp_path, monkeypatch):
    """docs/running.md: a running job's ledger is `<job>.csv.partial`, a row per call, and
    becomes `<job>.csv` when the job succeeds."""
    docs = (ROOT / "docs" / "running.md").read_text()
    assert "usage/<rule>/<job>.csv.partial" in docs
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(shell_job.CONFIG_ENV, raising=False)
    shell_job.export_config(
        load_config({"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}})
    )
    ledger = Path("results/usage/judge/user_001.csv")
    seen = []

    def ask(job: step.Job) -> None:
        for n in range(2):
            job.llm("judge").text([{"role": "user", "content": f"hello {n}"}])
            partial = ledger.with_name(ledger.name + ".partial")
            seen.append((len(list(csv.DictReader(partial.open()))), ledger.exists()))

    assert run_job(monkeypatch, ask) == 0
    assert seen == [(1, False), (2, False)]
    assert len(list(csv.DictReader(ledger.open()))) == 2
    assert not ledger.with_name(ledger.name + ".partial").exists()


def test_a_job_that_calls_an_llm_declares_its_ledger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(shell_job.CONFIG_ENV, raising=False)
    shell_job.export_config(
        load_config({"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}})
    )
    smk = SimpleNamespace(input=[], output=[], wildcards={}, rule="judge_calibration", log=[])
    job = step.Job(smk)
    with pytest.raises(step.ConfigError, match="declares no `usage` log"):
        job.llm("judge")


def job_config(rule: str, **wildcards: str) -> cs.JobConfig:
    cfg = load_config(full_config())
    return cs.JobConfig(rule, cfg.model_dump(mode="json"), cs.job_keys(rule, wildcards))


def test_a_job_reads_its_slice_and_nothing_else():
    judge = job_config("judge", system="longctx_full", user="user_001", mode="dump_all")
    assert judge.compat.judge_unknown_labels is False and judge.judge.min_kappa == 0.6
    assert judge.llm.timeout_s == 120.0 and judge.seed == 7  # an LLM rule's llm and seed
    assert judge.systems == SYSTEMS and judge.ks == [5]  # shape keys, and what derives from them
    with pytest.raises(cs.OutsideSlice, match=r"rule judge reads the config key max_turns, "):
        judge.max_turns  # noqa: B018
    with pytest.raises(cs.OutsideSlice, match="compat.longctx_drop_final_reply"):
        judge.compat.longctx_drop_final_reply  # noqa: B018  a sibling of a key it may read
    # a key of one mode, in that mode's jobs only
    att = job_config("attribution", system="amem", user="user_001", mode="retrieve")
    assert att.compat.retrieve_attribution_empty_transcript is False
    att = job_config("attribution", system="amem", user="user_001", mode="dump_all")
    with pytest.raises(cs.OutsideSlice):
        att.compat.retrieve_attribution_empty_transcript  # noqa: B018
    # a system's own keys, in its own jobs; no LLM settings for a job that calls none
    rollout = job_config("rollout", system="memt", user="user_001")
    assert (
        rollout.system_settings.memt.endpoint == "http://127.0.0.1:9/v1" and rollout.max_turns == 3
    )
    assert getattr(rollout.system_settings, "nomem", None) is None  # nomem has no settings model
    with pytest.raises(cs.OutsideSlice):
        rollout.system_settings.mem0  # noqa: B018
    tables = job_config("tables")
    assert tables.seed == 7 and tables.llm.cache_dir == ".cache/llm"  # runtime-only
    with pytest.raises(cs.OutsideSlice, match="llm.model"):
        tables.llm.model  # noqa: B018


def test_a_job_calls_the_roles_of_its_slice_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(shell_job.CONFIG_ENV, raising=False)
    shell_job.export_config(load_config(full_config()))
    log = SimpleNamespace(usage="results/usage/judge/x.csv")
    smk = SimpleNamespace(
        input=[], output=[], wildcards={"mode": "dump_all"}, rule="judge", log=log
    )
    job = step.Job(smk)
    job.llm("judge")
    with pytest.raises(step.ConfigError, match="rule judge calls role writer, which is not in"):
        job.llm("writer")


def test_slices_are_built_from_the_validated_config():
    raw = full_config()
    cfg = load_config(copy.deepcopy(raw))
    params = cs.Slicer(cfg).params("judge")
    assert params["cfg_role_judge"] == {"role judge": cs.role_identity(cfg, "judge")}
    assert params["cfg_compat_judge_unknown_labels"] == {"compat.judge_unknown_labels": False}
    assert params["cfg_seed"] == {"seed": raw["seed"]}


def test_the_paper_config_gives_the_default_runs_banks_another_slice():
    """Must-show 3, without running the default config: a bank job of the default run and of
    config/paper.yaml (layered over it, as Snakemake merges them) differ in their slice."""
    from snakemake.utils import update_config

    default = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    paper = copy.deepcopy(default)
    update_config(paper, yaml.safe_load((ROOT / "config" / "paper.yaml").read_text()))
    before = cs.Slicer(load_config(default)).params("bank")
    after = cs.Slicer(load_config(paper)).params("bank")
    assert sum(after["cfg_dims_per_category"]["dims_per_category"].values()) == 31
    assert before["cfg_dims_per_category"] != after["cfg_dims_per_category"]


def test_a_block_the_config_file_leaves_out_reads_as_its_default():
    """A job reads its slice from the exported config; one written without the defaults (a
    hand-made file, a test's) reads a missing block as the model's default."""
    raw = {"n_users": 1, "systems": ["nomem"], "llm": {"backend": "fake"}}
    rollout = cs.JobConfig("rollout", raw, cs.job_keys("rollout", {"system": "nomem"}))
    assert rollout.simulator.max_reply_chars == 1500 and rollout.max_turns == 25
    assert rollout.seed == 0  # an LLM rule's seed
    bare = cs.JobConfig("rollout", {}, cs.job_keys("rollout", {"system": "nomem"}))
    with pytest.raises(step.ConfigError, match="^n_users: required key is missing$"):
        bare.n_users  # noqa: B018
