"""The backends' endpoints (memprobe/llm/providers.py): where a role's requests go."""

from __future__ import annotations

import pytest

from memprobe.config import load_config
from memprobe.llm.client import LLMError, client_for
from tests.helpers.workflow import tiny_config


def test_a_local_server_url_without_a_model_id_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMPROBE_LOCAL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.delenv("MEMPROBE_LOCAL_MODEL_ID", raising=False)
    raw = tiny_config("http://127.0.0.1:9/v1")
    raw["llm"] = {"backend": "local", "cache_dir": str(tmp_path / "c")}
    with pytest.raises(LLMError, match="MEMPROBE_LOCAL_MODEL_ID") as err:
        client_for("judge", load_config(raw))
    assert "\n" not in str(err.value)
