"""What the model servers we launch share (llama.cpp for ``local``, vLLM for memt, the
embedding server): a child that dies with its parent, an allowlisted environment, a wait for
``/health``, and a proof that the server answering is our child before it sees a key.

Where a server listens: vLLM and the embedding server on a Unix socket in a fresh directory
only this user can enter (:func:`private_dir`), so no other user can bind the address first or
connect at all (every route is guarded, not only those vLLM's key covers); llama.cpp on a TCP
port it binds itself (port 0) and reports over a pipe. Either way the parent checks that the
listening socket belongs to its child (the peer's pid on a Unix socket, ``/proc`` for TCP)
before it sends the first request that carries a key or a text.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import secrets
import select
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

# Loopback requests never go through HTTP(S)_PROXY (open_direct): a proxy would see the run's
# key and prompts, or (without NO_PROXY) make every health check time out.
from memprobe.llm.providers import open_direct

# What a child's environment may hold: the names a Python, torch, CUDA or vLLM process reads,
# never a provider key under whatever name it was configured, a proxy, DATABASE_URL or an SSH
# agent. The project's own variables and the Hugging Face hub's are named one by one (a key
# can be configured under any MEMPROBE_ or HF_ name: MEMPROBE_OPENAI, HF_PAT); the other
# families by prefix. Within those, a name that looks like a secret, a value carrying URL
# credentials and a value that some variable left out also holds (a copy of a key) are
# dropped too.
_ALLOWED = frozenset(
    "PATH HOME USER LOGNAME SHELL LANG LANGUAGE TZ TERM TMPDIR TEMP TMP LD_LIBRARY_PATH "
    "VIRTUAL_ENV PYTHONPATH PYTHONHASHSEED PYTHONUNBUFFERED PYTHONDONTWRITEBYTECODE "
    "SSL_CERT_FILE SSL_CERT_DIR "
    # huggingface_hub's settings (never HF_TOKEN, HF_TOKEN_PATH or a name of one's own)
    "HF_HOME HF_HUB_CACHE HF_ASSETS_CACHE HF_XET_CACHE HF_DATASETS_CACHE HF_MODULES_CACHE "
    "HF_HUB_OFFLINE HF_DATASETS_OFFLINE HF_ENDPOINT HF_HUB_DISABLE_TELEMETRY "
    "HF_HUB_DISABLE_PROGRESS_BARS HF_HUB_DISABLE_SYMLINKS_WARNING HF_HUB_DISABLE_XET "
    "HF_HUB_DISABLE_IMPLICIT_TOKEN HF_HUB_ENABLE_HF_TRANSFER HF_HUB_ETAG_TIMEOUT "
    "HF_HUB_DOWNLOAD_TIMEOUT "
    # what our servers read themselves (memprobe/serving/embed_service.py, llm/cpu_cost.py)
    "MEMPROBE_EMBED_LANES MEMPROBE_JOB_STATS".split()
)
_ALLOWED_PREFIXES = (
    "LC_", "XDG_", "CONDA_", "TRANSFORMERS_", "SENTENCE_TRANSFORMERS_", "TORCH", "PYTORCH_",
    "CUDA_", "NVIDIA_", "NCCL_", "VLLM_", "TRITON_", "OMP_", "MKL_", "OPENBLAS_", "KMP_",
    "GGML_", "LLAMA_", "HIP_", "ROCR_", "SLURM_",
)  # fmt: skip
_SECRET_NAME = re.compile(r"(?i)(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH)")
_URL_CREDENTIALS = re.compile(r"(?i)[a-z][a-z0-9+.-]*://[^/\s@]+@")


class NotHealthy(RuntimeError):
    """The server exited (``exit_code`` set) or stayed unhealthy past the timeout."""

    def __init__(self, exit_code: int | None) -> None:
        super().__init__(exit_code)
        self.exit_code = exit_code


class NotOurs(RuntimeError):
    """The server on the port does not hold the run's key: someone else answers there."""


def health_url(base_url: str) -> str:
    # Both servers answer /health at the root, next to /v1.
    return base_url.rstrip("/").removesuffix("/v1") + "/health"


def child_env(**extra: str) -> dict[str, str]:
    """The allowlisted part of the parent's environment, plus ``extra`` (the child's own key)."""
    allowed = {
        k: v
        for k, v in os.environ.items()
        if (k in _ALLOWED or k.startswith(_ALLOWED_PREFIXES))
        and not _SECRET_NAME.search(k)
        and not _URL_CREDENTIALS.search(v)
    }
    left_out = {v for k, v in os.environ.items() if k not in allowed and _key_like(v)}
    env = {k: v for k, v in allowed.items() if v not in left_out}
    return {**env, **extra}


def _key_like(value: str) -> bool:
    """Whether a value could be a key: long, one word, and not a path that exists (``PWD``
    left out must not take ``HOME`` with it when they are the same folder)."""
    return len(value) >= 16 and not any(c.isspace() for c in value) and not os.path.exists(value)


# -- Unix sockets in a private directory ------------------------------------------------------
_SUN_PATH_MAX = 100  # sockaddr_un holds 108 bytes; leave room for the file name


def private_dir(prefix: str) -> Path:
    """A new directory that only this user can enter (``mkdtemp``: 0700, never reused).

    Under ``$XDG_RUNTIME_DIR`` where set (per user by design), else the temp dir; ``/tmp``
    when that path would be too long for a socket address."""
    base = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    if not os.path.isdir(base) or len(base) > _SUN_PATH_MAX - 40:
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix=prefix, dir=base))


def remove_private_dir(path: Path | None) -> None:
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


class UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """Our JSON servers' HTTP on a Unix socket (the handlers are unchanged)."""

    daemon_threads = True
    # Every job of a run may connect at once: socketserver's default queue of 5 turned 48
    # Mem-T rollouts' connections away (EAGAIN), and a job turned away loads the model itself.
    request_queue_size = socket.SOMAXCONN


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        deadline = time.monotonic() + (self.timeout or 0.0)
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.socket_path)
                break
            except BlockingIOError:  # EAGAIN: its queue is full; the server is busy, not gone
                sock.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)
            except OSError:
                sock.close()
                raise
        self.sock = sock


def unix_request(
    socket_path: str,
    method: str,
    path: str,
    *,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 5.0,
) -> tuple[int, bytes]:
    """One HTTP request over a Unix socket: (status, body); OSError when nothing answers."""
    conn = _UnixConnection(socket_path, timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except http.client.HTTPException as err:
        raise OSError(f"bad HTTP answer on {socket_path}: {err}") from None
    finally:
        conn.close()


def peer_pid(socket_path: str, timeout: float = 5.0) -> int:
    """The pid of the process listening on ``socket_path`` (the kernel's word: SO_PEERCRED)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[0]


def in_group(leader: int, pid: int) -> bool:
    """Whether ``pid`` is the child ``leader`` or one of its workers (its own process group:
    setsid)."""
    try:
        return pid == leader or os.getpgid(pid) == leader
    except ProcessLookupError:
        return False


def proc_net_address(field: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """The address of a ``/proc/net/tcp[6]`` ``ADDR:PORT`` field (32-bit words in host order)."""
    raw = bytes.fromhex(field.rsplit(":", 1)[0])
    words = [raw[i : i + 4] for i in range(0, len(raw), 4)]
    if sys.byteorder == "little":
        words = [w[::-1] for w in words]
    return ipaddress.ip_address(b"".join(words))


def reaches(listener: ipaddress.IPv4Address | ipaddress.IPv6Address, host: str) -> bool:
    """Whether a socket listening on ``listener`` answers connections to ``host``: the same
    address, a wildcard, or the IPv4-mapped form of it. A host that is not an address
    (a name) could be any of them: every listener counts."""
    try:
        target = ipaddress.ip_address(host)
    except ValueError:
        return True
    if isinstance(listener, ipaddress.IPv6Address) and listener.ipv4_mapped:
        listener = listener.ipv4_mapped
    return listener == target or listener.is_unspecified


def listening_inodes(port: int, host: str) -> set[int] | None:
    """Inodes of the sockets listening on TCP ``port`` that a connection to ``host`` could
    reach (a listener on another address with the same port number cannot answer it), or
    None without /proc/net."""
    found: set[int] = set()
    tables = [Path("/proc/net/tcp"), Path("/proc/net/tcp6")]
    if not tables[0].exists():
        return None
    for table in tables:
        try:
            lines = table.read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state != "0A" or int(local.rsplit(":", 1)[1], 16) != port:  # 0A: LISTEN
                continue
            if reaches(proc_net_address(local), host):
                found.add(inode)
    return found


def group_socket_inodes(leader: int) -> set[int]:
    """The socket inodes held by the child ``leader`` and its workers (read from
    /proc/<pid>/fd)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or not in_group(leader, int(entry.name)):
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue  # gone, or not ours to read
        for fd in fds:
            try:
                link = os.readlink(fd)
            except OSError:
                continue  # closed since the listing (the listing's own, when it is this process)
            if link.startswith("socket:["):
                found.add(int(link[8:-1]))
    return found


def listener_is_ours(proc: subprocess.Popen, base_url: str, uds: str | None) -> bool:
    """Whether something listens at the server's address yet (False: not yet); raises
    :class:`NotOurs` when a socket listening there is not the child's.

    Nothing is sent: a Unix socket names its listener's pid; a TCP port's listeners are found
    in /proc/net/tcp and looked for among the child's descriptors (on a system without /proc
    the key check of :func:`prove_ours` is all there is)."""
    if uds:
        try:
            pid = peer_pid(uds, timeout=1.0)
        except OSError:  # no socket file yet, or bound but not listening yet
            return False
        if not in_group(proc.pid, pid):
            raise NotOurs(f"{uds} is held by process {pid}, not by the server we started")
        return True
    where = urlsplit(base_url)
    port = where.port
    listening = listening_inodes(port, where.hostname or "") if port else None
    if listening is None:
        return True
    strangers = listening - group_socket_inodes(proc.pid)
    if strangers:
        raise NotOurs(
            f"{base_url}: port {port} is held by a process we did not start; "
            "another server answers on this port"
        )
    return bool(listening)


def found_is_ours(base_url: str, pid: int) -> None:
    """A server found by its URL (an env file, a state file), not started by this process:
    the socket listening at ``base_url`` must be held by process ``pid`` (or its workers),
    running as this user, before a key or a prompt goes there; :class:`NotOurs` in one line
    otherwise (it stopped; another process, maybe another user's, holds its port now).
    Nothing is sent. Without /proc there is nothing to look in: unchecked, as
    :func:`listener_is_ours`."""
    where = urlsplit(base_url)
    port = where.port
    listening = listening_inodes(port, where.hostname or "") if port else None
    if listening is None:
        return
    try:
        owner = os.stat(f"/proc/{pid}").st_uid
    except (FileNotFoundError, ValueError):
        owner = None
    if owner != os.getuid():
        raise NotOurs(
            f"{base_url}: the server it names (pid {pid}) is "
            + ("no longer running" if owner is None else f"another user's (uid {owner})")
        )
    if not listening:
        raise NotOurs(f"{base_url}: nothing listens there now (its server, pid {pid}, stopped)")
    if listening - group_socket_inodes(pid):
        raise NotOurs(
            f"{base_url}: port {port} is held by a process other than its server (pid {pid}): "
            "another server answers on this port"
        )


def die_with_parent() -> None:  # runs in the child before exec
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def status(
    url: str,
    headers: dict[str, str] | None = None,
    timeout_s: float = 5.0,
    uds: str | None = None,
) -> int:
    """The HTTP status of ``GET url`` (0: no answer), never through a proxy; over the Unix
    socket ``uds`` when given (``url`` then names only the path)."""
    if uds:
        try:
            path = urlsplit(url).path
            return unix_request(uds, "GET", path, headers=headers, timeout=timeout_s)[0]
        except OSError:
            return 0
    try:
        with open_direct(urllib.request.Request(url, headers=headers or {}), timeout=timeout_s):
            return 200
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, OSError):
        return 0


def wait_healthy(
    proc: subprocess.Popen | None,
    base_url: str,
    timeout_s: float,
    poll_s: float,
    uds: str | None = None,
) -> None:
    """Poll ``/health`` until it answers 200; raise :class:`NotHealthy` otherwise.

    With a child (``proc``), nothing is asked before the listening socket is proven to be
    the child's (:func:`check_listener`; :class:`NotOurs` otherwise)."""
    url = health_url(base_url)
    deadline = time.monotonic() + timeout_s
    proven = proc is None
    while time.monotonic() < deadline:
        code = proc.poll() if proc else None
        if code is not None:
            raise NotHealthy(code)
        if not proven:
            proven = listener_is_ours(proc, base_url, uds)  # type: ignore[arg-type]
        if proven and status(url, uds=uds) == 200:  # 503 while the model loads
            return
        time.sleep(poll_s)
    raise NotHealthy(None)


def prove_ours(base_url: str, key: str, uds: str | None = None) -> None:
    """The run's key opens ``/v1/models`` and a random wrong key is refused, or :class:`NotOurs`.

    Called only once the listener is proven to be our child (:func:`wait_healthy`): this
    checks that the child really requires the key it was given."""
    url = base_url.rstrip("/") + "/models"
    wrong = status(url, {"Authorization": f"Bearer {secrets.token_urlsafe(24)}"}, uds=uds)
    good = status(url, {"Authorization": f"Bearer {key}"}, uds=uds)
    if good != 200 or wrong not in (401, 403):
        raise NotOurs(
            f"{base_url}: the run's key got HTTP {good or 'no answer'} and a wrong key HTTP "
            f"{wrong or 'no answer'}; the server does not hold the run's key"
        )


def read_address(proc: subprocess.Popen, fd: int, timeout_s: float) -> str:
    """The ``http://host:port`` line a child writes to ``fd`` once it has bound its port."""
    deadline = time.monotonic() + timeout_s
    data = b""
    try:
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotHealthy(None)
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(fd, 256)
                if not chunk:  # the child closed its end without an address: it died
                    raise NotHealthy(proc.wait())
                data += chunk
            elif proc.poll() is not None:
                raise NotHealthy(proc.returncode)
    finally:
        os.close(fd)
    return data.split(b"\n", 1)[0].decode("ascii").strip()


class ServedProcess:
    """A model server in its own process group, logging to ``log_path``: ``launch`` starts
    it, ``stop`` ends the whole group (servers spawn workers), politely first."""

    log_path: Path
    proc: subprocess.Popen | None = None
    grace_s = 20.0  # SIGTERM, then SIGKILL after this long

    def launch(self, cmd: list[str], env: dict[str, str], pass_fds: tuple[int, ...] = ()) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                pass_fds=pass_fds,
                preexec_fn=die_with_parent,
            )

    # -- what a failed start says, per server (one line naming the config key to look at)
    error: type[Exception] = RuntimeError
    base_url = ""
    key = ""
    uds: str | None = None  # the Unix socket it listens on (in ``socket_dir``), if any
    socket_dir: Path | None = None

    @property
    def pid(self) -> int:
        """The server's process (its group's leader): what a found server's file names."""
        return self.proc.pid if self.proc else 0

    def not_ours(self, err: NotOurs) -> str:
        return str(err)

    def exited(self, status: int) -> str:
        return f"the server exited with status {status} (log: {self.log_path})"

    def timed_out(self, timeout_s: float) -> str:
        return f"the server was not healthy after {timeout_s:.0f}s (log: {self.log_path})"

    def healthy_and_ours(self, timeout_s: float, poll_s: float) -> None:
        """Wait for ``base_url``'s health check, then prove the server holds our ``key``."""
        try:
            wait_healthy(self.proc, self.base_url, timeout_s, poll_s, self.uds)
            if self.key:
                prove_ours(self.base_url, self.key, self.uds)
        except NotOurs as err:
            raise self.error(self.not_ours(err)) from None
        except NotHealthy as err:
            raise self.unhealthy(err, timeout_s) from None

    def unhealthy(self, err: NotHealthy, timeout_s: float) -> Exception:
        code = err.exit_code
        return self.error(self.exited(code) if code is not None else self.timed_out(timeout_s))

    def ready_or_stopped(self, wait: Callable[[], None]) -> None:
        """Run ``wait`` (health checks); on any failure or interrupt the server is stopped."""
        try:
            wait()
        except BaseException:
            self.stop()
            raise

    def stop(self, grace_s: float | None = None) -> None:
        proc, self.proc = self.proc, None
        directory, self.socket_dir = self.socket_dir, None
        try:
            self._end(proc, grace_s)
        finally:
            remove_private_dir(directory)

    def _end(self, proc: subprocess.Popen | None, grace_s: float | None) -> None:
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=self.grace_s if grace_s is None else grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass
