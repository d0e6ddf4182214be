"""The protocols a config can hold itself to (``protocol: paper``, ``protocol: release_compat``)."""

from __future__ import annotations

from typing import Any

from memprobe.vocabulary import CATEGORIES, MODES

# docs/fidelity.md row by row). A config that declares ``protocol: paper`` must hold every one
# of them after Snakemake's merge, so neither a layer underneath (config/config.yaml's
# small-model settings) nor a ``--config`` can change one silently.
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
    "llm.model": "gpt-5.4-mini",
    "llm.max_tokens": 8192,
    "llm.local.assistant_max_tokens": None,
    "system_settings.longctx_full.tailor": False,
    "system_settings.amem.writer.temperature": 1.0,
    "system_settings.amem.item_shape": "release",
    "system_settings.mem0.writer.model": "gpt-4o-mini",
    "system_settings.mem0.writer.temperature": 0.0,
    "system_settings.mem0.writer.max_tokens": 2000,
    "system_settings.mem0.embedder": "openai",
    "system_settings.mem0.hybrid_search": True,
    "system_settings.memt.temperature": 0.7,
    "system_settings.memt.max_tool_steps": 6,
    "system_settings.memt.embedder": "BAAI/bge-m3",
    "system_settings.memt.embedder_max_seq_length": None,
    "system_settings.memt.profile_sources": "turns",
    "system_settings.memt.embed_source": True,
    "system_settings.memt.stop_at_tool_call": True,
    "system_settings.memt.observation_sources": True,
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
