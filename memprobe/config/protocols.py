"""The protocols a config can hold itself to (``protocol: paper``, ``protocol: release_compat``)."""

from __future__ import annotations

from typing import Any

from memprobe.vocabulary import CATEGORIES, MODES

# The keys the paper's protocol fixes, with their values (config/paper.yaml sets each one;
# docs/fidelity.md row by row). A config that declares ``protocol: paper`` must hold every one
# of them after Snakemake's merge, so neither a layer underneath (config/config.yaml's
# small-model settings) nor a ``--config`` can change one silently. Every other key of the
# config is in FREE below, with the reason the protocol leaves it to the run.
PAPER_PROTOCOL: dict[str, Any] = {
    "seed": 0,
    "n_users": 50,
    "dims_per_category": dict(zip(CATEGORIES, (7, 7, 7, 5, 5), strict=True)),
    "systems": ["nomem", "longctx_full", "amem", "mem0", "memt"],
    "modes": list(MODES),
    "top_k": 5,
    "max_turns": 25,
    "bank.pool_sample": None,
    "bank.show_examples": True,
    "bank.show_axes": True,
    "bank.persona": "release",
    "tasks.max_edits": 3,
    "simulator.max_reply_chars": None,
    "slotfill.context_tokens": 245_000,
    "slotfill.overflow": "flag",
    "judge.form": "llm",
    "judge.degenerate_as_unknown": False,
    "compat.longctx_drop_final_reply": False,
    "compat.retrieve_attribution_empty_transcript": False,
    "compat.judge_unknown_labels": False,
    "compat.memt_discovery_order": False,
    "compat.amem_stale_index": False,
    "prompts.bank_select": "bank_select_paper",
    "prompts.task_write": "task_write_paper",
    "prompts.task_critic": "task_critic_paper",
    "prompts.task_edit": "task_edit_paper",
    "prompts.user_simulator": "user_simulator_paper",
    "prompts.preference_judge": "preference_judge_paper",
    "prompts.slotfill": "slotfill_paper",
    # Our wording of the release's rules in every run (docs/fidelity.md says so per stage).
    "prompts.persona_narrative": "persona_narrative",
    "prompts.assistant_system": "assistant_system",
    "prompts.recovery_judge": "recovery_judge",
    "prompts.attribution_oracle": "attribution_oracle",
    "prompts.attribution_disclosure": "attribution_disclosure",
    "prompts.attribution_subclass": "attribution_subclass",
    "llm.backend": "openai",
    "llm.model": "gpt-5.4-mini",
    "llm.max_tokens": 8192,
    "llm.local.assistant_max_tokens": None,
    "system_settings.longctx_full.tailor": False,
    "system_settings.amem.writer.model": "gpt-5.4-mini",
    "system_settings.amem.writer.temperature": 1.0,
    "system_settings.amem.writer.max_tokens": None,  # llm.max_tokens
    "system_settings.amem.item_shape": "release",
    "system_settings.mem0.writer.model": "gpt-4o-mini",
    "system_settings.mem0.writer.temperature": 0.0,
    "system_settings.mem0.writer.max_tokens": 2000,
    "system_settings.mem0.embedder": "openai",
    "system_settings.mem0.embedder_model": "text-embedding-3-small",
    "system_settings.mem0.embedder_dims": 1536,
    "system_settings.mem0.hybrid_search": True,
    "system_settings.memt.model": "Mem-T-4B",
    "system_settings.memt.temperature": 0.7,
    "system_settings.memt.max_tokens": None,
    "system_settings.memt.max_tool_steps": 6,
    "system_settings.memt.update_topk": 3,
    "system_settings.memt.search_topk": 5,
    "system_settings.memt.embedder": "BAAI/bge-m3",
    "system_settings.memt.embedder_max_seq_length": None,
    "system_settings.memt.profile_sources": "turns",
    "system_settings.memt.embed_source": True,
    "system_settings.memt.stop_at_tool_call": True,
    "system_settings.memt.observation_sources": True,
    "system_settings.memt.single_profile_hit": True,
    "system_settings.memt.turns_top_k": True,
    "system_settings.memt.dedupe_turns": True,
    "system_settings.memt.observation_times": True,
    "system_settings.memt.update_times": True,
}
# config/release-compat.yaml: the paper's protocol with the release's own choices where we
# fixed something (every compat switch on, one unchecked edit).
RELEASE_COMPAT_PROTOCOL: dict[str, Any] = PAPER_PROTOCOL | {
    "tasks.max_edits": 1,
    "compat.longctx_drop_final_reply": True,
    "compat.retrieve_attribution_empty_transcript": True,
    "compat.judge_unknown_labels": True,
    "compat.memt_discovery_order": True,
    "compat.amem_stale_index": True,
}
PROTOCOLS: dict[str, dict[str, Any]] = {
    "paper": PAPER_PROTOCOL,
    "release_compat": RELEASE_COMPAT_PROTOCOL,
}

# llm.roles.<role>: the fields a protocol fixes for every role. A role's temperature and reply
# bound are the release's per role (unset), and its model is the run's ``llm.model`` (unset,
# or that model by name); a per-system writer setting goes under ``system_settings``.
ROLE_FIXED = ("model", "temperature", "max_tokens")

# Why a key is left to the run, by kind.
_PLACE = "where the run's files go or come from on this machine (a path or a folder name)"
_ENDPOINT = "how an endpoint is reached: its address and the variable holding its key"
_PACE = "how fast and how persistently calls are made, never what is asked"
_REASKS = (
    "how often an invalid reply is asked again before a stand-in takes its place; every "
    "stand-in is recorded and flags the cells it touches"
)
_REPORT = "what is reported or flagged about the run; changes no number"
_SOURCE = (
    "a documented variant of the protocol's sources: the release's own users, records, "
    "dialogues or pool in place of ours (docs/fidelity.md rows pool and Replay; the tables "
    "name it)"
)
_PLACEMENT = "where a system's jobs run and how its server starts (cluster, GPU, start-up)"
_LOCAL = "backend local's own settings: protocol: paper runs backend openai (guarded)"

# Every key of the config that no protocol fixes, with its reason (``<role>``, ``<price>``:
# any entry of that mapping, as docs/configuration.md names them). tests/config/
# test_protocols.py walks the config model (every built-in system's settings and backend's
# block included) and fails on a key that is neither here nor guarded.
FREE: dict[str, str] = {
    "protocol": "the guard itself",
    "run.name": _PLACE,
    "results_dir": _PLACE,
    "release_dir": _PLACE,
    "users.release_dir": _PLACE,
    "release.bank_file": _PLACE,
    "release.tasks_dir": _PLACE,
    "release.pool_file": _PLACE,
    "judge.calibration.release_dir": _PLACE,
    "llm.cache_dir": _PLACE,
    "llm.rate_limit.state_dir": _PLACE,
    "system_settings.memt.model_path": (
        "where this machine keeps Mem-T-4B's weights; the served name (`model`) is guarded"
    ),
    "system_settings.memt.vllm_bin": _PLACE,
    "users.source": _SOURCE,
    "release.import_runs": _SOURCE,
    "release.runs": _SOURCE,
    "rollout.replay": _SOURCE,
    "bank.pool": _SOURCE,
    "llm.base_url": _ENDPOINT,
    "llm.api_key_env": _ENDPOINT,
    "llm.roles.<role>.base_url": _ENDPOINT,
    "llm.roles.<role>.api_key_env": _ENDPOINT,
    "system_settings.memt.endpoint": _ENDPOINT,
    "system_settings.memt.api_key_env": _ENDPOINT,
    "system_settings.memt.serve": (
        "whether Mem-T's jobs start their own vllm serve or call a running `endpoint`"
    ),
    "llm.timeout_s": _PACE,
    "llm.max_attempts": _PACE,
    "llm.backoff_s": _PACE,
    "llm.concurrency": _PACE,
    "llm.rate_limit.requests_per_minute": _PACE,
    "llm.rate_limit.tokens_per_minute": _PACE,
    "llm.rate_limit.roles.<role>.requests_per_minute": _PACE,
    "llm.rate_limit.roles.<role>.tokens_per_minute": _PACE,
    "llm.rate_limit.share": _PACE,
    "llm.rate_limit.provider_signals": _PACE,
    "llm.max_reasks": _REASKS,
    "llm.resample_invalid": _REASKS,
    "llm.max_stand_in_share": (
        "when a run with too many stand-ins stops before its tables; changes no number of a "
        "run that finishes"
    ),
    "system_settings.memt.gpu_model": _PLACEMENT,
    "system_settings.memt.cpus_per_gpu": _PLACEMENT,
    "system_settings.memt.startup_timeout_s": _PLACEMENT,
    "system_settings.memt.encode_in_job": _PLACEMENT + "; the same encoder either way",
    "system_settings.memt.vllm_args": (
        "the site's vllm serve flags (GPU memory, parallelism); the weights' served name and "
        "the context are set by memprobe"
    ),
    "progress.interval_s": _REPORT,
    "cluster_embedding.server": _PLACEMENT + "; the same vectors either way",
    "cluster_embedding.idle_exit_s": _PLACEMENT,
    "compare.runs": _REPORT + " (other runs' scores set beside this run's)",
    "progress.prices.<price>.input": _REPORT,
    "progress.prices.<price>.output": _REPORT,
    "tasks.leak_threshold": _REPORT + " (the leak check is a diagnostic)",
    "judge.calibration.on_fail": _REPORT + " (or ends the run before any rollout)",
    "judge.calibration.source": _REPORT,
    "judge.calibration.n": _REPORT,
    "judge.calibration.users": _REPORT,
    "judge.min_kappa": _REPORT,
    "judge.max_bias": _REPORT,
    "judge.cross_check": _REPORT,
    "judge.cross_check_margin": _REPORT,
    "judge.scorer": "the offline judge's figures: under judge.form: llm (guarded) only "
    "judge.cross_check reads them",
    "llm.local.package": _LOCAL,
    "llm.local.model_path": _LOCAL,
    "llm.local.sha256": _LOCAL,
    "llm.local.threads": _LOCAL,
    "llm.local.context_tokens": _LOCAL,
    "llm.local.parallel": _LOCAL,
    "llm.local.cache_reuse": _LOCAL,
    "llm.local.startup_timeout_s": _LOCAL,
    "llm.local.spin_count": _LOCAL,
}
