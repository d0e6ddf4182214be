"""The package's shape (docs/architecture.md): no import cycle, and the top layers stay on top.

Read from the source (every ``import``, also those inside functions), so the check is fast and
sees the lazy imports a run may or may not reach.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"memprobe": "memprobe", "agents": "memprobe.agents"}  # agents/ installs as this
# The top of the house: the steps' orchestration and the reports are used, never users.
TOP = ("memprobe.cli", "memprobe.workflow", "memprobe.report", "memprobe.release")


def module_graph() -> dict[str, set[str]]:
    files = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts]
            files[".".join([package, *(p for p in parts if p != "__init__")])] = path
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in files.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            else:
                continue
            graph[module] |= {n for n in names if n in files and n != module}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n) :] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_no_module_imports_itself_through_others():
    cycle = find_cycle(module_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_top_layers_are_imported_only_from_the_top():
    def layer(module: str) -> str:
        return next((t for t in TOP if module == t or module.startswith(t + ".")), "")

    may_import = {"memprobe.cli": set(TOP), "memprobe.workflow": set(TOP[2:])}
    wrong = [
        f"{a} imports {b}"
        for a, deps in module_graph().items()
        for b in deps
        if layer(b) not in ("", layer(a), *may_import.get(layer(a), ()))
    ]
    assert not wrong, wrong


def test_the_check_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
