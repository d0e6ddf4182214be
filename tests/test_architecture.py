"""The package's shape: the layer order of docs/architecture.md holds for every import.

The order is read from the table in docs/architecture.md ("The layers"), so it is written
once: a module imports only modules of its own row or of rows above it in the table (the
layers below). Every ``import`` counts, also those inside functions and under
``TYPE_CHECKING``, read from the source, so the check is fast and sees the lazy imports a run
may or may not reach. There is no list of allowed exceptions: a name resolved at run time
from a string ("module:attr" in a registry, an entry point) is how a lower layer reaches a
higher one, and the registry's own imports are checked like any other.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from memprobe.workflow.code_inputs import imported

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGES = {"memprobe": "memprobe", "agents": "memprobe.agents"}  # agents/ installs as this


def module_files(root: Path = ROOT) -> dict[str, Path]:
    files = {}
    for folder, package in PACKAGES.items():
        for path in (root / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(root / folder).with_suffix("").parts]
            files[".".join([package, *(p for p in parts if p != "__init__")])] = path
    return files


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules of the package it imports (``from a import b`` counts a.b)."""
    files = module_files(root)
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in files.items():
        graph[module] = {n for n in imported(path) if n in files and n != module}
    return graph


def layers(doc: Path = ARCHITECTURE) -> list[list[str]]:
    """The module prefixes of each row of the layer table, bottom layer first."""
    section = doc.read_text(encoding="utf-8").split("## The layers")[1].split("\n## ")[0]
    rows = [line.split("|")[1] for line in section.splitlines() if re.match(r"^\| `", line)]
    out = []
    for cell in rows:
        prefixes = []
        for path in re.findall(r"`([^`]+)`", cell):
            path = path.removesuffix("/").removesuffix(".py").removesuffix("/__init__")
            dotted = path.replace("/", ".")
            prefixes.append("memprobe." + dotted if dotted.split(".")[0] == "agents" else dotted)
        out.append(prefixes)
    return out


def layer_of(module: str, table: list[list[str]]) -> int | None:
    """The row holding the longest prefix of ``module`` (None: in no row)."""
    best: tuple[int, int] | None = None
    for i, prefixes in enumerate(table):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return best[0] if best else None


def upward_imports(graph: dict[str, set[str]], table: list[list[str]]) -> list[str]:
    wrong = []
    for a, deps in sorted(graph.items()):
        for b in sorted(deps):
            la, lb = layer_of(a, table), layer_of(b, table)
            if la is not None and lb is not None and lb > la:
                wrong.append(f"{a} (layer {la + 1}) imports {b} (layer {lb + 1})")
    return wrong


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


def test_every_module_is_in_a_layer():
    table = layers()
    assert len(table) >= 10, table
    lost = sorted(m for m in module_files() if layer_of(m, table) is None)
    assert not lost, f"modules in no row of docs/architecture.md's layer table: {lost}"


def test_no_module_imports_a_layer_above_its_own():
    wrong = upward_imports(module_graph(), layers())
    assert not wrong, "imports against the layer order of docs/architecture.md:\n" + "\n".join(
        wrong
    )


def test_no_module_imports_itself_through_others():
    cycle = find_cycle(module_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_check_sees_an_upward_import_and_a_cycle(tmp_path):
    doc = tmp_path / "architecture.md"
    doc.write_text(
        "## The layers\n\n| layer | what |\n| --- | --- |\n"
        "| `memprobe/config.py` | low |\n| `memprobe/llm/` | middle |\n"
        "| `memprobe/cli.py`, `agents/` | top |\n\n## Next\n"
    )
    table = layers(doc)
    assert table == [["memprobe.config"], ["memprobe.llm"], ["memprobe.cli", "memprobe.agents"]]
    graph = {
        "memprobe.llm.client": {"memprobe.config", "memprobe.agents.base"},  # lazy or not
        "memprobe.cli": {"memprobe.agents.base", "memprobe.llm.client"},  # same row, below
    }
    assert upward_imports(graph, table) == [
        "memprobe.llm.client (layer 2) imports memprobe.agents.base (layer 3)"
    ]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_a_lazy_import_counts(tmp_path):
    pkg = tmp_path / "memprobe"
    (pkg / "llm").mkdir(parents=True)
    (tmp_path / "agents").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "llm" / "__init__.py").write_text("")
    (pkg / "llm" / "client.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from memprobe.testing import fake\n"
        "def f():\n    from memprobe.serving import local_server\n"
    )
    for name in ("serving", "testing"):
        (pkg / name).mkdir()
        (pkg / name / "__init__.py").write_text("")
    (pkg / "serving" / "local_server.py").write_text("")
    (pkg / "testing" / "fake.py").write_text("")
    graph = module_graph(tmp_path)
    assert graph["memprobe.llm.client"] == {
        "memprobe.serving",
        "memprobe.serving.local_server",
        "memprobe.testing",
        "memprobe.testing.fake",
    }


def test_test_modules_share_code_through_tests_helpers_only():
    """A helper two test modules need lives in tests/helpers/, not in one of them."""
    wrong = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for name in imported(path):
            if name.startswith("tests.") and ".test_" in f".{name.split('.', 1)[1]}":
                wrong.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not wrong, "\n".join(wrong)


def missing_test_modules(root: Path = ROOT) -> list[str]:
    """The modules of ``memprobe/`` without their ``tests/<sub-package>/test_<module>.py``."""
    missing = []
    for path in sorted((root / "memprobe").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(root / "memprobe")
        mirror = root / "tests" / rel.parent / f"test_{rel.name}"
        if not mirror.is_file():
            missing.append(f"memprobe/{rel}: no {mirror.relative_to(root)}")
    return missing


def test_every_module_has_its_mirrored_test_module():
    missing = missing_test_modules()
    assert not missing, "tests/ mirrors the package (docs/architecture.md):\n" + "\n".join(missing)


def test_the_mirror_check_sees_a_missing_test_module(tmp_path):
    for rel in ("memprobe/cli.py", "memprobe/llm/client.py", "memprobe/llm/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "tests" / "llm").mkdir(parents=True)
    (tmp_path / "tests" / "test_cli.py").write_text("")
    assert missing_test_modules(tmp_path) == ["memprobe/llm/client.py: no tests/llm/test_client.py"]
    (tmp_path / "tests" / "llm" / "test_client.py").write_text("")
    assert missing_test_modules(tmp_path) == []


MAX_MODULE_LINES = 600  # a module is a rule's unit of rerun: small, one job each


def long_modules(root: Path = ROOT, limit: int = MAX_MODULE_LINES) -> list[str]:
    """The library's modules (``memprobe/``, ``agents/``) longer than ``limit`` lines."""
    return [
        f"{path.relative_to(root)}: {n} lines"
        for folder in PACKAGES
        for path in sorted((root / folder).rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > limit
    ]


def test_no_library_module_is_over_600_lines():
    assert not long_modules(), "split along rule lines:\n" + "\n".join(long_modules())


def test_the_length_check_sees_a_long_module(tmp_path):
    (tmp_path / "memprobe").mkdir()
    (tmp_path / "agents").mkdir()
    (tmp_path / "memprobe" / "big.py").write_text("x = 1\n" * 601)
    (tmp_path / "agents" / "small.py").write_text("x = 1\n" * 600)
    assert long_modules(tmp_path) == ["memprobe/big.py: 601 lines"]


MAX_COMMON_SMK_LINES = 250  # input functions and declarations; the glue is in memprobe/workflow/


def test_common_smk_holds_input_functions_and_declarations_only():
    common = (ROOT / "rules" / "common.smk").read_text(encoding="utf-8")
    assert len(common.splitlines()) <= MAX_COMMON_SMK_LINES
    # The run's start and end are one call each (memprobe/workflow/lifecycle.py).
    for hook in ("onstart", "onsuccess", "onerror"):
        body = common.split(f"\n{hook}:\n", 1)[1].split("\n\n", 1)[0]
        assert len([ln for ln in body.splitlines() if ln.strip()]) == 1, (hook, body)
