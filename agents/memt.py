"""memt: our client of Mem-T's tool protocol (docs/release-format.md §3.5, arXiv 2601.23014).

Mem-T is a trained memory-operation policy served behind an OpenAI-compatible endpoint (vLLM).
It answers in text with ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks;
we parse them and execute the operations on a small on-disk vector store with five collections
(turns, facts, experiences, personas, summary). Its settings are ``system_settings.memt``
(``MemTSettings`` below; the keys named here are its keys).

- Order within a user turn, as in the protocol: retrieve for the incoming message, reply,
  then write that message (``end_turn``); the episode's final message is written by
  ``end_episode``.
- Write, per user turn: the raw turn goes to ``turns``; one *formation* call (create_fact,
  create_experience, update_persona, update_summary; no max_tokens cap unless ``max_tokens``
  sets one, since a cut reply loses its last tool calls); then per fact/experience candidate
  the most similar stored items and one *update* call (add_item, update_item, delete_item,
  ignore_item).
- Read: a ReAct loop (search_summary/facts/experiences/personas/turns, finish) within
  ``max_tool_steps``; each tool result goes back in the ``memt_tool_result`` prompt file, a
  step without a tool call gets ``memt_nudge``; ``stop_at_tool_call`` ends each request at the
  closing tag (the release's stop sequence), and ``observation_sources`` shows with each item
  the source turns this search has not shown yet (as the release's tool results did).
  A search_* call finds ``search_topk`` items in its collection; the release's counts are
  switches: one summary or persona per search (a persona also by ``name``:
  ``single_profile_hit``), the model's ``top_k`` of turns (``turns_top_k``), turns already
  shown left out (``dedupe_turns``); ``observation_times`` adds a fact's or experience's
  times to its tool result and ``update_times`` those of the candidate and its similar items
  to an update call, as the release's did.
  ``search(query, k)`` returns the top-k distinct surfaced items ranked by cosine similarity
  to the query; the release's discovery order (scores None) is ``compat.memt_discovery_order``.
  Raw turns are never returned by search (as in the release).
- A malformed tool call (bad JSON, unknown tool, missing arguments, unknown id) is counted in
  ``meta()["stats"]`` and skipped; it never fails the rollout.
- The assistant reply stays on the shared reply role (the paper's ``memt_memonly``).

The prompts (prompts/memt_*.md) are our own wording of Mem-T's tool protocol, not the
prompts Mem-T-4B was trained with; to run it with those, put them in these prompt files (the
tool-result wrapper and the nudge included).

Where Mem-T's pieces are: its settings and what the run checks of them (``MemTSettings``,
``_check``, ``_preflight`` below; docs/configuration.md); its policy's client,
``policy_client`` below (built by ``client_for`` like every role's); the vLLM server a memt
job starts (memprobe/serving/vllm_server.py, env ``envs/vllm.yaml``); the stand-in policy
that tests and dry runs serve (memprobe/testing/memt_standin.py); the release's memt runs as
our records (memprobe/release/importer.py); its GPU placement (``Resources`` below,
docs/cluster.md).

The store as the release built it (docs/release-format.md §2.7), switch by switch:
each fact/experience document repeats its source turns after ``SOURCE_SEP``; persona and
summary documents do too with ``profile_sources: turns`` (``ids``: their source turn ids
only, a smaller dump); ``embed_source`` embeds the whole document (content + source block)
rather than the distilled content; ``embedder_max_seq_length`` unset keeps the embedder's
own maximum (bge-m3: 8192 tokens).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Literal, cast

from memprobe.agents.base import HistoryTurn, MemorySystem, latest_user_message
from memprobe.agents.memt_store import (
    COLLECTIONS,
    FORMATION_TOOLS,
    RETRIEVE_TOOLS,
    SOURCE_SEP,
    TOOL_CLOSE,
    UPDATE_TOOLS,
    Hit,
    VectorStore,
    parse_tool_calls,
)
from pydantic import Field

from memprobe.config.base import KeyedError
from memprobe.config.schema import Config
from memprobe.llm.client import LLM, client_for
from memprobe.llm.openai_backend import OPENAI
from memprobe.llm.providers import Endpoint, backend, endpoint_for
from memprobe.registry.systems import CostPriors, GpuPlacement, Resources, declare
from memprobe.serving import embeddings, vllm_server
from memprobe.serving.vllm_server import VllmServing
from memprobe.spec.prompts import render
from memprobe.spec.records import write_atomic

SUMMARY_ID = "hmb_session"
PROFILES = ("summary", "personas")  # one item per search in the release
TIMED = ("facts", "experiences")  # their tool results carry times in the release
TURNS_DEFAULT_K, TURNS_MAX_K = 5, 50  # search_turns' top_k argument in the release
# The optional arguments the retrieve prompt names where the release's tools take them.
PERSONA_NAME_ARGUMENT = ', "name": string (optional: one person\'s profile, by name)'
TURNS_TOP_K_ARGUMENT = f', "top_k": integer (optional, default {TURNS_DEFAULT_K})'
MAX_REPLY_MEMORIES = 20
FALLBACK_CHARS = 400
STORE_FILE = "memt_store.json"


class MemTSettings(VllmServing, GpuPlacement):
    """``system_settings.memt``: where its policy model is served (``endpoint``, or ``serve:
    true`` with ``model_path``: memprobe/serving/vllm_server.py, env ``envs/vllm.yaml``), how it
    samples, how its store behaves, and where its GPU jobs go on a cluster."""

    temperature: float = Field(default=0.7, ge=0.0, le=2.0)  # the release's hard-coded value
    """Mem-T's sampling temperature (the release's)"""
    # No cap by default: the release sent none, and a formation reply with many tool calls
    # cut at a cap loses its last calls; the server's context still bounds every reply.
    max_tokens: int | None = Field(default=None, ge=1)
    """reply bound per Mem-T call (unset: none, as in the release)"""
    max_tool_steps: int = Field(default=6, ge=1)
    """ReAct steps per search"""
    update_topk: int = Field(default=3, ge=1)
    """similar items shown to an update call"""
    search_topk: int = Field(default=5, ge=1, description="items per search_* tool call")
    embedder: str | None = Field(
        default=None,
        description="sentence-transformers path or name, local (unset: the packaged MiniLM)",
    )
    # None: the embedder's own maximum (bge-m3: 8192 tokens, as the release's Chroma used it).
    embedder_max_seq_length: int | None = Field(default=None, ge=16)
    """tokens the embedder reads per text (unset: the model's own; bge-m3 8192)"""
    # Persona and summary documents: "turns" repeats every source turn after the content, as
    # the release's did; "ids" keeps the ids of their source turns only (a smaller dump).
    profile_sources: Literal["ids", "turns"] = "ids"
    """persona/summary documents: `ids` of their source turns, or every source `turns` (the
    release)"""
    # The vector of a stored item: true embeds its document (content + source block, as the
    # release's Chroma did); false embeds only the distilled content.
    embed_source: bool = False
    """embed each item's document (content + source turns, the release) instead of its content"""
    # Where a memt job encodes: in the job itself, on the host that serves Mem-T (its GPU host,
    # a cluster node), or through the run's embedding server on the machine that drives the
    # other systems. The vectors are the same either way (one model, one thread).
    encode_in_job: bool | None = None
    """encode in the memt job, not through the run's embedding server (unset: in the job when
    `serve` is true, on the GPU host that serves Mem-T)"""
    # ReAct requests stop at the closing tool-call tag (the release's stop sequence).
    stop_at_tool_call: bool = False
    """ReAct requests stop at `</tool_call>` (the release's stop sequence)"""
    # A ReAct tool result shows each item's source turns not shown before in that search (the
    # release's did); false: id and content only.
    observation_sources: bool = False
    """a ReAct tool result shows each item's source turns not shown before (the release)"""
    # The release's search tools (Mem-T's memory_retrieval.py), switch by switch; false: ours.
    single_profile_hit: bool = False
    """search_summary and search_personas return the one closest item, and search_personas
    with a `name` looks that person's profile up by name (the release); false: `search_topk`
    items as from the other collections"""
    turns_top_k: bool = False
    """search_turns returns the model's `top_k` argument of turns (default 5, at most 50; the
    release); false: `search_topk`, the argument ignored"""
    dedupe_turns: bool = False
    """search_turns leaves out the turns this search has already shown, as turns or as
    sources (the release)"""
    observation_times: bool = False
    """fact and experience tool results show each item's valid time and the turn it was
    extracted at (the release)"""
    update_times: bool = False
    """an update call shows the turn, start and end times of the candidate and of each similar
    item (the release); false: their id and content"""


def settings_of(cfg: Config) -> MemTSettings:
    return cast(MemTSettings, cfg.system_settings.memt)


def _check(cfg: Config) -> None:
    """A run of memt needs its policy served: an endpoint, or its own vllm serve."""
    m = settings_of(cfg)
    if not (m.endpoint or m.serve):
        raise KeyedError(
            "system_settings.memt",
            "system_settings.memt: set endpoint (a running Mem-T server) or serve: true with "
            "model_path",
        )


def _preflight(cfg: Config, local_files: bool) -> list[str]:
    """Mem-T's files where its jobs run on this machine: the weights and vLLM they serve, the
    embedder they load offline."""
    m = settings_of(cfg)
    if not local_files:
        return []
    out = vllm_server.missing_files(m)
    if m.embedder and not embeddings.available_offline(m.embedder):
        out.append(
            f"system_settings.memt.embedder: {m.embedder} is neither a directory nor in the "
            "Hugging Face cache (jobs run offline)"
        )
    return out


def _encodes_in_job(cfg: Config) -> bool:
    m = settings_of(cfg)
    return m.serve if m.encode_in_job is None else m.encode_in_job


def _key_variables(cfg: Config) -> list[str]:
    m = settings_of(cfg)
    return [m.api_key_env] if m.endpoint and m.api_key_env else []


@declare(
    "memt",
    searchable=True,
    llm_writer=True,
    embeds=True,
    encodes_in_job=_encodes_in_job,
    prompts=("memt_formation", "memt_update", "memt_retrieve", "memt_tool_result", "memt_nudge"),
    settings=MemTSettings,
    # How its server is reached and where its jobs go, never what they write.
    runtime_settings=(
        "api_key_env",
        "vllm_bin",
        "startup_timeout_s",
        "gpu_model",
        "cpus_per_gpu",
        "encode_in_job",  # where the same vectors are computed
    ),
    reads=("compat.memt_discovery_order",),
    parts=("memprobe.agents.memt_store",),  # its tool calls and vector store
    check=_check,
    preflight=_preflight,
    key_variables=_key_variables,
    recall_changes_store=False,  # the ReAct search reads the store, never writes it
    resources=Resources(gpus=1, served_model=True),
    priors=CostPriors(
        table5_m=(120.91, 3.77),  # the gpt-5.4-mini side only
        turns_per_user=78.7,
        writer_calls_per_write=1.0,  # one formation; updates and ReAct steps: ledger only
        writer_in_table5=False,  # Mem-T-4B's local calls
        writer_tokens_known=False,
        probe_calls_per_query=6.0,  # the ReAct step budget per query (upper bound)
        attribution={"dump_all": 1349, "retrieve": 1026},
        retrieve_attribution_paid=0.1,
    ),
)
class MemT(MemorySystem):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings_of(self.config)
        self._policy: LLM | None = None

    @property
    def policy(self) -> LLM:
        # Built on first use: a probe job that only loads the store needs no server yet.
        if self._policy is None:
            self._policy = policy_client(self.config, self.writer)
        return self._policy

    # -- lifecycle ------------------------------------------------------------------------
    def reset(self, user_id: str) -> None:
        super().reset(user_id)
        s = self.settings
        self.store = VectorStore(
            s.embedder, s.embed_source, s.embedder_max_seq_length, _encodes_in_job(self.config)
        )
        self.n_turns = 0
        self.counters = {"f": 0, "e": 0}
        self.stats: Counter[str] = Counter()

    def _count(self, key: str, n: int = 1) -> None:
        if n:
            self.stats[key] += n

    def _ask(
        self,
        kind: str,
        messages: list[dict[str, str]],
        tools: tuple[str, ...],
        stop: list[str] | None = None,
    ):
        raw = self.policy.text(messages, where=f"memt {kind}, user {self.user_id}", stop=stop)
        if stop and "<tool_call>" in raw and TOOL_CLOSE not in raw:
            raw += TOOL_CLOSE  # the stop sequence is not part of the reply: close the call
        calls, bad = parse_tool_calls(raw, tools)
        self._count(f"calls_{kind}")
        self._count("malformed_tool_calls", bad)
        for c in calls:
            self._count(f"tool_{c.name}")
        return raw, calls

    # -- writes ---------------------------------------------------------------------------
    def _write_turn(self, text: str) -> None:
        self.n_turns += 1
        tid = f"t{self.n_turns:04d}"
        turn = f"user said: {text}"
        self.store.upsert("turns", tid, turn, {"col_name": "turns", "turn_time": tid})
        summary = self.store.items["summary"].get(SUMMARY_ID)
        personas = [
            {"name": pid, "content": p["metadata"]["memory_content"]}
            for pid, p in self.store.items["personas"].items()
        ]
        messages = render(
            self._prompt("memt_formation"),
            summary=summary["metadata"]["memory_content"] if summary else "(empty)",
            personas=json.dumps(personas, ensure_ascii=False) if personas else "(none)",
            turn=turn,
        )
        _, calls = self._ask("formation", messages, FORMATION_TOOLS)
        for call in calls:
            content = call.text()
            if not content:
                self._count("malformed_tool_calls")
            elif call.name == "update_summary":
                self._upsert_profile("summary", SUMMARY_ID, content, tid, turn)
            elif call.name == "update_persona":
                name = str(call.arguments.get("name") or "User").strip() or "User"
                self._upsert_profile("personas", name, content, tid, turn)
            else:
                col = "facts" if call.name == "create_fact" else "experiences"
                self._update(col, content, tid, turn)

    def _upsert_profile(self, col: str, item_id: str, content: str, tid: str, turn: str) -> None:
        old = self.store.items[col].get(item_id)
        sources = (old["metadata"]["source_turn_ids"] if old else []) + [tid]
        if self.settings.profile_sources == "turns":  # every source turn, as the release kept
            turns = (old["metadata"]["original_turns"] if old else []) + [turn]
            document = content + SOURCE_SEP + "\n".join(turns)
        else:  # the latest only; the ids of all sources below
            turns, document = [turn], content
        meta = {
            "col_name": col,
            "turn_time": tid,
            "memory_content": content,
            "original_turns": turns,
            "source_turn_ids": sources,
        }
        self.store.upsert(col, item_id, document, meta)

    def _update(self, col: str, candidate: str, tid: str, turn: str) -> None:
        similar = self.store.query(col, candidate, self.settings.update_topk)
        times = self.settings.update_times
        shown = []
        for h in similar:
            meta = self.store.items[col][h.id]["metadata"]
            entry = {"id": h.id, "content": meta["memory_content"]}
            shown.append(entry | item_times(meta["turn_time"]) if times else entry)
        proposed = {"content": candidate} | item_times(tid)
        messages = render(
            self._prompt("memt_update"),
            collection=col,
            candidate=json.dumps(proposed, ensure_ascii=False) if times else candidate,
            similar=json.dumps(shown, ensure_ascii=False) if shown else "(no similar items)",
        )
        _, calls = self._ask("update", messages, UPDATE_TOOLS)
        for call in calls:
            content = call.text() or candidate
            target = str(call.arguments.get("id") or "")
            if call.name == "add_item":
                prefix = col[0]
                self.counters[prefix] += 1
                self._put(
                    col, f"{prefix}{self.counters[prefix]:04d}", content, [tid], [turn], "add"
                )
            elif call.name == "ignore_item":
                continue
            elif target not in self.store.items[col]:
                self._count("malformed_tool_calls")  # update/delete of an id that is not there
            elif call.name == "delete_item":
                self.store.delete(col, target)
            else:
                old = self.store.items[col][target]["metadata"]
                self._put(
                    col,
                    target,
                    content,
                    old["source_turn_ids"] + [tid],
                    old["original_turns"] + [turn],
                    "update",
                    old["op_ids"],
                )

    def _put(self, col, item_id, content, tids, turns, op, ops=()) -> None:
        meta = {
            "col_name": col,
            "turn_time": tids[-1],
            "memory_content": content,
            "original_turns": turns,
            "source_turn_ids": tids,
            "op_ids": [*ops, f"{op}@{tids[-1]}"],
        }
        self.store.upsert(col, item_id, content + SOURCE_SEP + "\n".join(turns), meta)

    # -- reads ----------------------------------------------------------------------------
    def _react(self, question: str) -> list[Hit]:
        """Surfaced items (never raw turns) in discovery order, deduplicated by id."""
        s = self.settings
        messages = render(
            self._prompt("memt_retrieve"),
            question=question,
            persona_name=PERSONA_NAME_ARGUMENT if s.single_profile_hit else "",
            turns_top_k=TURNS_TOP_K_ARGUMENT if s.turns_top_k else "",
        )
        stop = [TOOL_CLOSE] if s.stop_at_tool_call else None
        found: dict[tuple[str, str], Hit] = {}
        seen: set[str] = set()  # the turns this search has shown, as turns or as sources
        for _ in range(s.max_tool_steps):
            raw, calls = self._ask("retrieve", messages, RETRIEVE_TOOLS, stop)
            messages = [*messages, {"role": "assistant", "content": raw}]
            if not calls:
                messages += render(self._prompt("memt_nudge"))
                continue
            call = calls[0]  # one action per ReAct step
            if call.name == "finish":
                break
            col = call.name.removeprefix("search_")
            hits = self._tool_hits(col, call.arguments, question)
            if col != "turns":
                for h in hits:
                    found.setdefault((col, h.id), h)
            response = json.dumps(self._observation(col, hits, seen), ensure_ascii=False)
            messages += render(self._prompt("memt_tool_result"), response=response)
        return list(found.values())

    def _tool_hits(self, col: str, args: dict[str, Any], question: str) -> list[Hit]:
        """What one search_* call finds: the release's counts per collection, or ours."""
        s = self.settings
        k = s.search_topk
        if col in PROFILES and s.single_profile_hit:
            name = args.get("name")
            if col == "personas" and isinstance(name, str) and name.strip():
                found = name.strip() in self.store.items[col]  # a lookup by id, not a search
                return [Hit(col, name.strip(), 1.0)] if found else []
            k = 1
        elif col == "turns" and s.turns_top_k:
            k = turns_k(args.get("top_k"))
        return self.store.query(col, str(args.get("query") or question), k)

    def _observation(self, col: str, hits: list[Hit], seen: set[str]) -> list[dict[str, Any]]:
        """A tool result's items; ``seen`` collects the turns it shows."""
        s = self.settings
        shown = []
        for h in hits:
            item = self.store.items[col][h.id]
            meta = item["metadata"]
            entry = {"id": h.id, "content": meta.get("memory_content") or item["document"]}
            if col == "turns":
                if s.dedupe_turns:  # the release's: one seen set for turns and sources
                    if item["document"] in seen:
                        continue
                    seen.add(item["document"])
            else:
                if s.observation_times and col in TIMED:
                    entry |= item_times(meta["turn_time"])
                if s.observation_sources:  # turns this search has not shown
                    turns = dict.fromkeys(meta.get("original_turns", []))
                    new = [t for t in turns if t not in seen]
                    seen.update(new)
                    if new:
                        entry["sources"] = new
            shown.append(entry)
        return shown

    def recall(self, task: str, history: list[HistoryTurn]) -> list[str]:
        # Retrieve for the incoming message; it is written after the reply (end_turn).
        hits = self._react(latest_user_message(task, history))
        lines = [self.store.items[h.collection][h.id]["metadata"]["memory_content"] for h in hits]
        if not lines:
            lines = [m["content"][:FALLBACK_CHARS] for m in self.get_all_memories()]
        return lines[:MAX_REPLY_MEMORIES]

    def end_turn(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        self._write_turn(latest_user_message(task, history))

    def end_episode(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        # The final user message is never answered; it is still written to memory.
        if history:
            self._write_turn(history[-1]["user"])

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        hits = self._react(query)
        if self.config.compat.memt_discovery_order:
            return [self._item(h, None) for h in hits[:k]]
        qvec = self.store.embed(query)
        scored = [(self.store.similarity(qvec, h.collection, h.id), h) for h in hits]
        scored.sort(key=lambda pair: -pair[0])  # stable: ties keep discovery order
        return [self._item(h, score) for score, h in scored[:k]]

    def _item(self, hit: Hit, score: float | None) -> dict[str, Any]:
        meta = self.store.items[hit.collection][hit.id]["metadata"]
        return {
            "id": hit.id,
            "content": meta["memory_content"],
            "category": hit.collection,
            "score": score,
            "timestamp": meta["turn_time"],
        }

    def get_all_memories(self) -> list[dict[str, Any]]:
        return [
            {
                "id": item_id,
                "content": item["document"],
                "category": col,
                "metadata": item["metadata"],
                "timestamp": item["metadata"]["turn_time"],
            }
            for col in COLLECTIONS
            for item_id, item in self.store.items[col].items()
        ]

    # -- persistence ----------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        super().save(directory)
        self.store.save(directory)
        write_atomic(
            directory / STORE_FILE,
            {
                "items": self.store.items,
                "n_turns": self.n_turns,
                "counters": self.counters,
                "stats": dict(self.stats),
            },
        )

    def load(self, directory: Path) -> None:
        state = json.loads((directory / STORE_FILE).read_text(encoding="utf-8"))
        self.store.load(directory, state["items"])
        self.n_turns = state["n_turns"]
        self.counters = state["counters"]

    def meta(self) -> dict[str, Any]:
        s = self.settings
        return {
            "mem_t_model": s.model,
            "embedder": s.embedder or "all-MiniLM-L6-v2 (packaged)",
            "max_tool_steps": s.max_tool_steps,
            "update_topk": s.update_topk,
            "temperature": s.temperature,
            "embedder_max_seq_length": s.embedder_max_seq_length,
            "profile_sources": s.profile_sources,
            "embed_source": s.embed_source,
            "stop_at_tool_call": s.stop_at_tool_call,
            "observation_sources": s.observation_sources,
            "single_profile_hit": s.single_profile_hit,
            "turns_top_k": s.turns_top_k,
            "dedupe_turns": s.dedupe_turns,
            "observation_times": s.observation_times,
            "update_times": s.update_times,
            "stats": dict(sorted(self.stats.items())),
            "counts": {c: len(self.store.items[c]) for c in COLLECTIONS},
        }


def turns_k(value: Any) -> int:
    """search_turns' ``top_k`` argument as the release read it: default 5, at most 50 (and at
    least 1; a value that is not a whole number counts as unset)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool):
        return TURNS_DEFAULT_K
    return min(max(value, 1), TURNS_MAX_K)


def item_times(turn_time: str) -> dict[str, str]:
    """An item's times as the release showed them: its valid time, empty (the release's client
    cleared the model's start and end times), and the turn it was extracted at (ours: the
    turn's id, where the release had the wall-clock time)."""
    return {"start_time": "", "end_time": "", "turn_time": turn_time}


# -- the policy's endpoint and client -----------------------------------------------------------
def policy_endpoint(cfg: Config) -> Endpoint:
    """The served Mem-T policy: an OpenAI-compatible endpoint (vLLM) keyed on the weights, so a
    new port replays from the cache and a new checkpoint does not."""
    if backend(cfg.llm.backend).answers_served_models:  # a dry run's stand-in answers it too
        return endpoint_for(cfg, {"base_url": None, "api_key_env": None})
    m = settings_of(cfg)
    base_url, uds = vllm_server.ensure(m)
    identity = vllm_server.cache_identity(m, base_url)
    return Endpoint(OPENAI.name, base_url, identity, vllm_server.key_env(m), cfg.llm.timeout_s, uds)


def policy_client(cfg: Config, writer: LLM | None) -> LLM:
    """The served Mem-T policy's client, on the writer's cache and usage ledger: built by
    ``client_for`` like every role's (re-asks, resampling, concurrency, the rate limiter)."""
    m = settings_of(cfg)
    ledger = writer.ledger if writer else None
    return client_for(
        "writer",
        cfg,
        ledger_path=ledger.path if ledger else None,
        job=ledger.job if ledger else "",
        attempt=writer.attempt if writer else 0,
        endpoint=policy_endpoint(cfg),
        overrides={"model": m.model, "temperature": m.temperature, "max_tokens": m.max_tokens},
    )
