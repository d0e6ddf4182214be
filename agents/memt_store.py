"""Mem-T's tool calls and its vector store (agents/memt.py's parts: inputs of its jobs).

A reply of the policy holds ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
blocks (``parse_tool_calls``); the store keeps five collections of ``{document, metadata}``
with normalised embeddings, on disk (``VectorStore``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from memprobe.serving import embeddings

COLLECTIONS = ("turns", "facts", "experiences", "personas", "summary")
FORMATION_TOOLS = ("create_fact", "create_experience", "update_persona", "update_summary")
UPDATE_TOOLS = ("add_item", "update_item", "delete_item", "ignore_item")
RETRIEVE_TOOLS = tuple(f"search_{c}" for c in COLLECTIONS) + ("finish",)
SOURCE_SEP = "\n\n----- ORIGINAL SOURCE -----\n"
TOOL_CLOSE = "</tool_call>"
VECTORS_FILE = "memt_vectors.npz"

_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


# The text argument of each write tool: ours is "content"; Mem-T's own tool schemas (which
# Mem-T-4B was trained on and the release used) name it per tool, and are accepted too.
TEXT_ARGUMENT = {
    "create_fact": "fact",
    "create_experience": "experience",
    "update_persona": "profile",
    "add_item": "document",
    "update_item": "document",
}


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]

    def text(self) -> str:
        """The call's text argument (``content``, or Mem-T's own name for it), stripped."""
        args = self.arguments
        value = args.get("content") or args.get(TEXT_ARGUMENT.get(self.name, "content"))
        return str(value or "").strip()


def parse_tool_calls(text: str, allowed: tuple[str, ...]) -> tuple[list[ToolCall], int]:
    """The well-formed calls of ``allowed`` tools in order, and the number of malformed blocks.

    A trailing block without its closing tag is accepted (servers often stop on the tag).
    """
    calls: list[ToolCall] = []
    malformed = 0
    for match in _TOOL_CALL.finditer(text or ""):
        try:
            obj = json.loads(match.group(1))
        except json.JSONDecodeError:
            malformed += 1
            continue
        args = obj.get("arguments", {}) if isinstance(obj, dict) else None
        if isinstance(args, str):  # some servers double-encode the arguments
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = None
        if (
            not isinstance(obj, dict)
            or obj.get("name") not in allowed
            or not isinstance(args, dict)
        ):
            malformed += 1
            continue
        calls.append(ToolCall(obj["name"], args))
    return calls, malformed


@dataclass
class Hit:
    collection: str
    id: str
    score: float


EMBED_RECENT = 256  # texts whose vectors a store keeps for a repeat


class VectorStore:
    """Five named collections of ``{document, metadata}`` with normalised embeddings, on disk.

    An item's vector is of its document (content + source block, as the release's Chroma
    embedded it) with ``embed_source``, else of its distilled text (``memory_content``).
    """

    def __init__(
        self,
        embedder: str | None,
        embed_source: bool = False,
        max_seq_length: int | None = None,
        in_job: bool = False,
    ) -> None:
        self.embedder = embedder
        self.in_job = in_job  # encode in this process (its own host), not the run's server
        self.embed_source = embed_source
        self.max_seq_length = max_seq_length
        self.items: dict[str, dict[str, dict[str, Any]]] = {c: {} for c in COLLECTIONS}
        self.vectors: dict[str, dict[str, np.ndarray]] = {c: {} for c in COLLECTIONS}
        self._recent: dict[str, np.ndarray] = {}  # text -> vector, the last EMBED_RECENT

    def embed(self, text: str) -> np.ndarray:
        """The text's vector. Each text is encoded alone, so a text seen again gets the vector
        a new encode would give: a ReAct step often asks every collection the same query."""
        vec = self._recent.get(text)
        if vec is None:
            encode = embeddings.encode_local if self.in_job else embeddings.encode
            vec = encode([text], self.embedder, max_seq_length=self.max_seq_length)[0]
            if len(self._recent) >= EMBED_RECENT:
                del self._recent[next(iter(self._recent))]
            self._recent[text] = vec
        return vec

    def upsert(self, col: str, item_id: str, document: str, metadata: dict[str, Any]) -> None:
        self.items[col][item_id] = {"document": document, "metadata": metadata}
        content = metadata.get("memory_content")
        self.vectors[col][item_id] = self.embed(
            document if self.embed_source or not content else content
        )

    def delete(self, col: str, item_id: str) -> bool:
        self.vectors[col].pop(item_id, None)
        return self.items[col].pop(item_id, None) is not None

    def query(self, col: str, text: str, n: int) -> list[Hit]:
        ids = list(self.items[col])
        if not ids or n < 1:
            return []
        matrix = np.stack([self.vectors[col][i] for i in ids])
        ranked = embeddings.top_k(self.embed(text), matrix, n)
        return [Hit(col, ids[i], score) for i, score in ranked]

    def similarity(self, vec: np.ndarray, col: str, item_id: str) -> float:
        return float(self.vectors[col][item_id] @ vec)

    def save(self, directory: Path) -> None:
        arrays = {}
        for col in COLLECTIONS:
            ids = list(self.items[col])
            if ids:
                arrays[col] = np.stack([self.vectors[col][i] for i in ids])
        tmp = directory / f".{VECTORS_FILE}.tmp.npz"
        # numpy's stub lets **arrays fill its allow_pickle: bool parameter
        np.savez(tmp, **arrays)  # type: ignore[arg-type]
        tmp.replace(directory / VECTORS_FILE)

    def load(self, directory: Path, items: dict[str, dict[str, dict[str, Any]]]) -> None:
        self.items = {c: dict(items.get(c, {})) for c in COLLECTIONS}
        with np.load(directory / VECTORS_FILE) as arrays:
            for col in COLLECTIONS:
                ids = list(self.items[col])
                matrix = arrays[col] if col in arrays.files else np.zeros((0, 0))
                if len(ids) != len(matrix):
                    raise ValueError(
                        f"{directory / VECTORS_FILE}: collection {col} has {len(matrix)} "
                        f"vectors for {len(ids)} items"
                    )
                self.vectors[col] = {i: matrix[n] for n, i in enumerate(ids)}
