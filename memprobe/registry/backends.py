"""Which LLM backends exist (``llm.backend``): each name and where its ``Backend`` object is.

A backend says where a role's requests go, what the response cache keys their replies on and
what sends them (the interface: ``memprobe.llm.providers.Backend``). Each lives with the layer
that owns what it needs: ``openai`` in the LLM layer, ``local`` beside the llama.cpp server it
talks to, ``fake`` with the test stand-ins. A backend in another package names its object in
an entry point of the ``memprobe.backends`` group. Nothing is imported until a name is used.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from memprobe.registry import RegistryError, plugins, resolve, searched

ENTRY_POINT_GROUP = "memprobe.backends"
BUILTIN: dict[str, str] = {
    "openai": "memprobe.llm.openai_backend:OPENAI",  # any OpenAI-compatible endpoint
    "local": "memprobe.serving.local_server:BACKEND",  # the run's llama.cpp server
    "fake": "memprobe.testing.fake_backend:BACKEND",  # schema-valid replies, in-process
}


@cache
def targets() -> dict[str, tuple[str, str]]:
    """name -> (target, where it was declared): the built-ins, then the entry points."""
    out = {name: (target, f"built-in backend {name!r}") for name, target in BUILTIN.items()}
    for name, target, where in plugins(ENTRY_POINT_GROUP):
        if name in out:
            raise RegistryError(f"{where}: {name!r} is a built-in backend's name; rename it")
        out[name] = (target, where)
    return out


def names() -> list[str]:
    return list(targets())


def unknown(name: str) -> str:
    return (
        f"unknown backend {name!r}; expected one of {', '.join(names())} "
        f"({searched(ENTRY_POINT_GROUP)})"
    )


@cache
def load(name: str) -> Any:
    """The backend object of ``name``, imported on first use."""
    try:
        target, where = targets()[name]
    except KeyError:
        raise RegistryError(unknown(name)) from None
    return resolve(target, where)
