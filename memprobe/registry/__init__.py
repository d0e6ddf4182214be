"""What can be plugged into MemProbe, by name: memory systems (``systems``) and LLM backends
(``backends``).

A registry maps a name to a "module:attr" target: the built-ins are listed in code, others come
from the entry points of the registry's group. A target is imported only when its name is first
used, so this layer imports nothing of memprobe above it (docs/architecture.md), and the config
can ask which names exist before the stack behind them loads.
"""

from __future__ import annotations

import importlib
import sys
from importlib.metadata import entry_points
from typing import Any


class RegistryError(ValueError):
    """A plugin that cannot be registered (one line)."""


def resolve(target: str, where: str) -> Any:
    """The object a "module:attr" target names (the module itself without ``:attr``)."""
    module, _, attr = target.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError as err:
        raise RegistryError(f"{where}: cannot import {module} ({err})") from None
    if not attr:
        return mod
    try:
        return getattr(mod, attr)
    except AttributeError:
        raise RegistryError(f"{where}: {module} has no {attr}") from None


def plugins(group: str) -> list[tuple[str, str, str]]:
    """(name, target, where) of each entry point of ``group`` installed for this interpreter."""
    return [
        (ep.name, ep.value, f"entry point {ep.name!r} ({group}, {ep.value})")
        for ep in entry_points(group=group)
    ]


def searched(group: str) -> str:
    """Where names were looked for: what an "unknown name" message says."""
    return f"the built-ins and the {group!r} entry points installed for {sys.executable}"
