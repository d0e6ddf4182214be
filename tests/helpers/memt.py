"""A stand-in vllm executable and the Mem-T settings that serve it."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from memprobe.config.loading import load_config
from tests.helpers.workflow import tiny_config


def fake_vllm(tmp_path: Path, body: str) -> str:
    """An executable named like vllm that records its argv and then runs ``body``."""
    exe = tmp_path / "vllm"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import json, sys, time\n"
        f"open({str(tmp_path / 'argv.json')!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        f"{body}\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return str(exe)


SERVE_STANDIN = (
    "from memprobe.testing.memt_standin import serve\n"
    "uds = sys.argv[sys.argv.index('--uds') + 1]\n"
    "time.sleep(1.0)  # a real server takes a while to become healthy\n"
    "serve(uds)"
)


def serve_settings(tmp_path: Path, exe: str, **extra):
    raw = tiny_config("http://127.0.0.1:9/v1", systems=["memt"])
    raw.setdefault("system_settings", {})["memt"] = {
        "serve": True,
        "model_path": "/models/mem-t-4b",
        "vllm_bin": exe,
        "vllm_args": ["--max-model-len", "8192"],
        **extra,
    }
    return load_config(raw).system_settings.memt
