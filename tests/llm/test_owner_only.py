"""Lock and state files only this user can open (memprobe/llm/owner_only.py), and lock waits
that end by the call's deadline: another local user can neither read, plant nor hold them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from memprobe.config.loading import load_config
from memprobe.llm import rate_limit
from memprobe.llm.client import client_for
from memprobe.llm.owner_only import NotPrivate, OwnerLock, open_private, private_dir
from memprobe.llm.rate_limit import Limits, RateLimiter
from memprobe.workflow import attempts
from tests.helpers.other_user import TRY_TO_OPEN, as_nobody, shared_folder, skip_unless_root
from tests.helpers.workflow import tiny_config

MSGS = [{"role": "user", "content": "hello"}]
LOW = {  # a provider signal that writes the shared pace file
    "x-ratelimit-limit-requests": "600",
    "x-ratelimit-remaining-requests": "1",
    "x-ratelimit-reset-requests": "0.05s",
}


def run_client(base_url: str, root: Path, **llm):
    raw = tiny_config(base_url)
    raw["llm"].update(
        cache_dir=str(root / "cache"),
        rate_limit={"requests_per_minute": 600, "tokens_per_minute": 100_000,
                    "state_dir": str(root / "rate_limit")},
        **llm,
    )  # fmt: skip
    return client_for("judge", load_config(raw), ledger_path=root / "usage.csv", job="test")


def test_another_user_can_open_no_lock_or_state_file_of_a_run(recorder_factory):
    """Issue 42, must show: the response cache's locks, the rate limiter's buckets, locks and
    pace file and a job's attempt were 0644 in 0755 folders: any local user could read them
    and, since flock needs only read access, hold every call of the run."""
    skip_unless_root()
    rec = recorder_factory([{"content": "hi", "headers": LOW}, {"content": "ho", "headers": LOW}])
    root = shared_folder()
    try:
        llm = run_client(rec.base_url, root)
        assert llm.text(MSGS) == "hi"
        assert llm.text([{"role": "user", "content": "again"}]) == "ho"
        attempts.bump(str(root / "cache"), "judge/user_001", 7, "usage.csv")
        state = [
            *(root / "cache").glob(".locks*"),
            *(root / "cache").glob(".locks*/*"),
            root / "rate_limit",
            *(root / "rate_limit").iterdir(),
            root / "cache" / "attempts",
            *(root / "cache" / "attempts").iterdir(),
        ]
        names = {p.name.split(".", 1)[-1] for p in state if p.is_file()}
        assert {"sqlite", "sqlite.lock", "pace.json", "pace.json.lock", "json"} <= names, names
        assert any(p.parent.name.startswith(".locks") for p in state)
        opened = as_nobody(TRY_TO_OPEN, *map(str, state))
        assert opened.returncode == 0, opened.stderr
        assert opened.stdout == "", f"nobody opened: {opened.stdout}"
        # ... while the folder they are in is one nobody may enter (the test is not vacuous).
        assert as_nobody(TRY_TO_OPEN, str(root / "cache")).stdout.strip() == str(root / "cache")
    finally:
        shutil.rmtree(root)


HOLDER = """
import fcntl, os, sys, time
for path in sys.argv[1:]:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fcntl.flock(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(30)
"""


def test_a_held_lock_holds_a_call_no_longer_than_its_deadline(recorder_factory, tmp_path):
    """Issue 42, must show: a lock wait had no end (a call with timeout_s=10 returned after 20 s,
    when the holder let go). Now each wait ends at the call's deadline and the call goes on:
    a holder (here a stuck process of the same user: no other user can open the files)
    delays it by at most that, whichever lock it holds."""
    rec = recorder_factory(["hi"])
    llm = run_client(rec.base_url, tmp_path, timeout_s=2.0)
    key = llm._key(llm._request(MSGS, None, 0), 0)
    db = next((tmp_path / "rate_limit").glob("*.sqlite"))
    held = [  # the cache's stripe (where this code and the code before it take it), the bucket
        tmp_path / "cache" / f".locks-{os.getuid()}" / key[:3],
        tmp_path / "cache" / ".locks" / key[:3],
        Path(f"{db}.lock"),
    ]
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, *map(str, held)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        t0 = time.monotonic()
        assert llm.text(MSGS) == "hi"
        took = time.monotonic() - t0
    finally:
        holder.kill()
        holder.wait()
    assert took < 2.0 * 2 + 2.0, took  # the cache's wait and the bucket's, each at most 2 s


def test_a_state_folder_another_user_made_stops_the_call_in_one_line():
    """Issue 42 item 3, must show: a folder of the run's state that another user made first
    (here with a pace an hour ahead, which held every call) is refused in one line naming the
    key to change; the cluster nodes' folder is per user (memprobe/workflow/cluster.py)."""
    skip_unless_root()
    root = shared_folder(0o1777)  # as /tmp: anyone may make a folder in it
    try:
        planted = root / "rate-limit"
        made = as_nobody(
            "import json, os, sys, time\n"
            "os.mkdir(sys.argv[1], 0o777); os.chmod(sys.argv[1], 0o777)\n"
            "p = os.path.join(sys.argv[1], 'x.pace.json')\n"
            "open(p, 'w').write(json.dumps({'next': time.time() + 3600}))\n",
            str(planted),
        )
        assert made.returncode == 0, made.stderr
        with pytest.raises(NotPrivate) as err:
            RateLimiter(Limits(requests=10), planted, "ep")
        line = str(err.value)
        assert line.startswith("llm.rate_limit.state_dir: ") and "uid 65534" in line
        assert "\n" not in line
    finally:
        shutil.rmtree(root)
    assert rate_limit.node_state_dir() == f"/tmp/memprobe-rate-limit-{os.getuid()}"


def test_a_pace_read_from_the_file_holds_a_request_no_longer_than_a_signal_may(
    tmp_path, monkeypatch
):
    """A pace file's ``next`` (written by a signal's hold, at most MAX_HOLD_S ahead) is never
    trusted for longer when read: a planted or corrupted one cannot hold the run for hours."""
    monkeypatch.setattr(rate_limit, "MAX_HOLD_S", 0.5)
    lim = RateLimiter(Limits(), tmp_path, "ep")
    lim._pace_path.write_text(json.dumps({"next": time.time() + 3600}))
    done = threading.Event()
    threading.Thread(
        target=lambda: (lim.acquire({"messages": []}), done.set()), daemon=True
    ).start()
    assert done.wait(5.0)


def test_a_folder_or_file_of_ours_is_tightened_and_a_link_refused(tmp_path):
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    assert private_dir(loose, "llm.cache_dir").stat().st_mode & 0o777 == 0o700
    (loose / "f").write_text("")
    (loose / "f").chmod(0o644)
    os.close(open_private(loose / "f", "llm.cache_dir"))
    assert (loose / "f").stat().st_mode & 0o777 == 0o600
    (tmp_path / "link").symlink_to(loose)
    with pytest.raises(NotPrivate, match="link"):
        private_dir(tmp_path / "link", "llm.rate_limit.state_dir")
    (loose / "g").symlink_to(loose / "f")
    with pytest.raises(NotPrivate, match="link"):
        open_private(loose / "g", "llm.cache_dir")


def test_a_lock_is_re_entrant_per_thread_and_excludes_other_threads(tmp_path):
    lock = OwnerLock(tmp_path / "l", timeout_s=0.3, key="llm.cache_dir")
    with lock, lock:
        other: list[bool] = []
        t = threading.Thread(target=lambda: other.append(lock.acquire()))
        t.start()
        t.join()
        assert other == [False]  # another thread waited its 0.3 s and gave up
    assert lock.acquire() and (lock.release() is None)
