"""One total deadline per HTTP call: connect, headers and body together.

httpx's timeouts are per socket operation, so a server that drips its reply a byte at a time
(headers or body) never trips one, and holds the call (and the cache lock on its key) as
long as it likes. Here every socket operation of a call waits at most for what is left of
the call's budget (``llm.timeout_s``), and one that would start after it fails at once as a
timeout, which the client retries like any other.

The budget is set by the client's request hook, on the thread that then runs the whole
call (httpx's sync client sends and reads on the caller's thread); the connections of the
client's transports, direct or through a proxy, read it through their network backend.
httpx2 is imported on first use (it is slow to import): jobs whose calls are all cached never
pay for it.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2

_CALL = threading.local()  # .deadline: time.monotonic() at which this thread's call ends


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the call's budget; ``error`` once it is spent."""
    deadline = getattr(_CALL, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the call took longer than llm.timeout_s")
    return left if timeout is None else min(timeout, left)


@functools.cache
def _backend_class() -> type:
    import httpcore2

    class Stream(httpcore2.NetworkStream):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            return self._inner.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            self._inner.write(buffer, _left(timeout, httpcore2.WriteTimeout))

        def close(self) -> None:
            self._inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            wait = _left(timeout, httpcore2.ConnectTimeout)
            return Stream(self._inner.start_tls(ssl_context, server_hostname, wait))

        def get_extra_info(self, info: str) -> Any:
            return self._inner.get_extra_info(info)

    class Backend(httpcore2.NetworkBackend):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
            wait = _left(timeout, httpcore2.ConnectTimeout)
            return Stream(self._inner.connect_tcp(host, port, wait, local_address, socket_options))

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            wait = _left(timeout, httpcore2.ConnectTimeout)
            return Stream(self._inner.connect_unix_socket(path, wait, socket_options))

        def sleep(self, seconds: float) -> None:
            self._inner.sleep(seconds)

    return Backend


def bounded(transport: Any) -> Any:
    """``transport`` (an ``httpx2.HTTPTransport``) with every socket wait under the deadline.

    httpx2 takes no network backend as an argument; its connection pool holds one, which is
    wrapped here (tests/llm/test_deadline.py: a dripped reply, headers or body, is cut off)."""
    pool = getattr(transport, "_pool", None)
    if pool is not None and not isinstance(pool._network_backend, _backend_class()):
        pool._network_backend = _backend_class()(pool._network_backend)
    return transport


@functools.cache
def _bounded_class(base: type) -> type:
    class Client(base):
        """An HTTP client whose transports (direct and proxies) are bounded."""

        def _init_transport(self, *args: Any, **kwargs: Any) -> Any:
            return bounded(super()._init_transport(*args, **kwargs))

        def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> Any:
            return bounded(super()._init_proxy_transport(*args, **kwargs))

    return Client


def _client_class() -> type:
    """openai's default HTTP client, bounded."""
    import openai

    return _bounded_class(openai.DefaultHttpxClient)


def status(url: str, timeout_s: float, *, trust_env: bool) -> int:
    """The HTTP status of ``GET url`` within ``timeout_s`` in all (connect, headers; the body
    is not read): a server that drips its headers cannot hold the caller (the preflight).
    ``httpx2.HTTPError`` when it gives no answer in time; httpx2 alone, without openai."""
    import httpx2

    def start(request: httpx2.Request) -> None:
        _CALL.deadline = time.monotonic() + timeout_s

    client_class = _bounded_class(httpx2.Client)
    with client_class(
        trust_env=trust_env, timeout=timeout_s, event_hooks={"request": [start]}
    ) as c:
        try:
            with c.stream("GET", url) as resp:
                return resp.status_code
        finally:
            _CALL.deadline = None


def http_client(
    timeout_s: float, *, trust_env: bool, transport: Any = None, uds: str | None = None
) -> httpx2.Client:
    """An HTTP client for the openai client whose every call ends within ``timeout_s``.

    ``uds``: every request goes to that Unix socket (the host in the URL is not resolved).
    ``transport``: a given transport (tests' mock), used as it is."""
    import httpx2

    def start(request: httpx2.Request) -> None:
        _CALL.deadline = time.monotonic() + timeout_s

    if uds is not None:
        transport = bounded(httpx2.HTTPTransport(uds=uds))
    kwargs: dict[str, Any] = {"transport": transport} if transport is not None else {}
    return _client_class()(trust_env=trust_env, event_hooks={"request": [start]}, **kwargs)
