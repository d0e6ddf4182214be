"""Replace the llama.cpp launcher of ``backend: local`` with the loopback fake endpoint.

With this directory on ``PYTHONPATH`` and ``MEMPROBE_FAKE_LLAMA=<log file>``, the run's
``local_server.Server`` starts ``tests/serving/fake_llama/server.py`` instead of llama.cpp:
everything else (onstart/onsuccess/onerror, the model check, the key, the state file, the
jobs' client) is the real code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if os.environ.get("MEMPROBE_FAKE_LLAMA"):
    from memprobe.serving import local_server

    def command(self, ready_fd: int) -> list[str]:
        server = str(Path(__file__).with_name("server.py"))
        fail = ["fail"] if os.environ.get("MEMPROBE_FAKE_LLAMA_FAIL") == "1" else []
        return [sys.executable, server, str(ready_fd), os.environ["MEMPROBE_FAKE_LLAMA"], *fail]

    local_server.Server.command = command  # type: ignore[method-assign]
