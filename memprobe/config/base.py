"""What every config block shares: strict models, the config's errors, an endpoint's URL."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

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
    # The docstring under a field is its meaning in docs/configuration.md (config/field_docs.py).
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# A query parameter that carries a credential (``?api-key=``, ``&access_token=``, ``sig=``).
_CREDENTIAL_PARAM = re.compile(r"(?i)(key|token|secret|passw|pwd|auth|sig|credential)")


def endpoint_url(v: str | None) -> str | None:
    """An OpenAI-compatible endpoint is an http(s) URL with a host (never file://, etc.),
    without a credential: the validated config goes to every job's config file and the URL
    to their logs, so ``user:password@`` and a key parameter are refused (the key goes in the
    variable ``api_key_env`` names). An error never repeats what it refuses."""
    if v is None:
        return v
    parts = urlsplit(v)
    where = parts.netloc.rsplit("@", 1)[-1]
    shown = f"{parts.scheme}://{where}{parts.path}"  # no credential, no query
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"{shown}: a user:password@ in the URL would be written to job configs and logs; "
            "put the key in the variable api_key_env names"
        )
    if any(_CREDENTIAL_PARAM.search(name) for name, _ in parse_qsl(parts.query, True)):
        raise ValueError(
            f"{shown}: a credential in the URL's query would be written to job configs and "
            "logs; put the key in the variable api_key_env names"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected an http:// or https:// URL with a host, got {v!r}")
    return v
