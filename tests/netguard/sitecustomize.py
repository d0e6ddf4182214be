"""Refuse every non-loopback connection in this process and log the attempt.

Put this directory on ``PYTHONPATH`` with ``MEMPROBE_NET_LOG=<file>`` and every Python process
(the Snakemake CLI and each job's script) imports it at start-up: it writes one ``armed`` line
per process to ``<file>.armed`` (proof the guard ran there) and one line per refused attempt to
``<file>``. Tests import :func:`install` directly for in-process checks.
"""

from __future__ import annotations

import ipaddress
import os
import socket

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def _is_loopback(host: object) -> bool:
    if host is None:
        return True  # getaddrinfo(None, port): the local host
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    host = str(host)
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def install(log_path: str | None = None, attempts: list[str] | None = None) -> None:
    """Patch socket so that only loopback (and AF_UNIX) connections are allowed."""
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def refuse(what: str) -> OSError:
        line = f"{os.getpid()} {what}"
        if attempts is not None:
            attempts.append(line)
        if log_path:
            with open(log_path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        return ConnectionRefusedError(f"network blocked by the test guard: {what}")

    def allowed(sock: socket.socket, address: object) -> bool:
        if sock.family == getattr(socket, "AF_UNIX", None):
            return True
        host = address[0] if isinstance(address, tuple) else address
        return _is_loopback(host)

    def connect(self, address):
        if not allowed(self, address):
            raise refuse(f"connect {address!r}")
        return real_connect(self, address)

    def connect_ex(self, address):
        if not allowed(self, address):
            raise refuse(f"connect_ex {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _is_loopback(host):
            raise socket.gaierror(str(refuse(f"getaddrinfo {host!r}")))
        return real_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo


_LOG = os.environ.get("MEMPROBE_NET_LOG")
if _LOG:
    install(_LOG)
    with open(_LOG + ".armed", "a", encoding="utf-8") as _fh:
        _fh.write(f"{os.getpid()}\n")
