"""What every config block shares (memprobe/config/base.py): strict models and endpoint URLs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from memprobe.config.base import KeyedError, Strict, endpoint_url


class Block(Strict):
    limit: float = 1.0
    """a limit"""


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.example.com/v1", None])
def test_an_http_url_with_a_host_is_an_endpoint(url):
    assert endpoint_url(url) == url


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://x/v1", "http:///v1", "nohost"])
def test_anything_else_is_refused_naming_what_was_expected(url):
    with pytest.raises(ValueError, match="expected an http:// or https:// URL with a host"):
        endpoint_url(url)


def test_a_block_refuses_unknown_keys_and_non_finite_numbers():
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        Block.model_validate({"limt": 2})
    with pytest.raises(ValidationError, match="finite number"):
        Block.model_validate({"limit": float("inf")})


def test_a_keyed_error_carries_the_key_it_blames():
    err = KeyedError("llm.rate_limit.roles.judge", "rate_limit.roles.judge: no endpoint")
    assert err.key == "llm.rate_limit.roles.judge" and str(err).startswith("rate_limit")


@pytest.mark.parametrize(
    "url",
    [
        "http://user:hunter2@127.0.0.1:8000/v1",
        "https://hunter2@api.example.com/v1",
        "https://api.example.com/v1?api-key=hunter2",
        "https://api.example.com/v1?x=1&access_token=hunter2",
        "file://user:hunter2@host/etc/passwd",
    ],
)
def test_a_credential_in_a_url_is_refused_without_echoing_it(url):
    """Issue 42: a URL's user:password@ or key parameter went into every job's config file
    and log line; a key belongs in the variable llm.api_key_env names."""
    with pytest.raises(ValueError) as err:
        endpoint_url(url)
    assert "hunter2" not in str(err.value)
    if url.startswith("http"):
        assert "api_key_env" in str(err.value)


def test_a_query_without_a_credential_is_kept():
    url = "https://x.openai.azure.com/openai/deployments/d?api-version=2024-06-01"
    assert endpoint_url(url) == url
