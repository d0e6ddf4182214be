"""What every config block shares: strict models, the config's errors, an endpoint's URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict


class ConfigError(ValueError):
    """A configuration problem, phrased as one line naming the key."""


class KeyedError(ValueError):
    """A whole-config check that fails on one key (``key``, dotted): the error names the
    layer that set it."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class Strict(BaseModel):
    # A field's docstring is its description: docs/configuration.md is generated from them.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, use_attribute_docstrings=True)


def endpoint_url(v: str | None) -> str | None:
    """An OpenAI-compatible endpoint is an http(s) URL with a host (never file://, etc.)."""
    if v is None:
        return v
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL with a host, got {v!r}")
    return v
