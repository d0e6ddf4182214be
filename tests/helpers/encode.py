"""A deterministic stand-in for the MiniLM encoder, for fast-tier tests of the offline judge."""

from __future__ import annotations

import hashlib
import re

import numpy as np


def bag_of_words(texts: list[str]) -> np.ndarray:
    """A deterministic stand-in for MiniLM: hashed word counts, L2-normalised."""
    out = np.zeros((len(texts), 4096))
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z]+", t.lower()):
            out[i, int(hashlib.sha256(w.encode()).hexdigest(), 16) % 4096] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1, norms)
