"""The library modules a rule's script runs, found from its imports: rule inputs (``lib``), so
that editing one reruns the rule's jobs (docs/currency.md).

A script's modules are the ones it imports, and the ones those import, every ``import``
counted (lazy ones inside functions too, as tests/test_architecture.py reads them), followed
through the modules that hold the protocol's logic and the reports. Shared plumbing is declared
by no rule and not followed: an edit there would rerun the whole benchmark, and must not change
a reply (the response cache replays it).

The inputs are the files of the package the DAG loads, which must be the package the jobs run:
in a checkout that shares another checkout's venv, the Snakefile's folder puts this checkout's
``memprobe/`` first at DAG load while each job's script imports the one the venv installed, so
an edit here would rerun jobs that never run it (``foreign_code`` stops that run).
"""

from __future__ import annotations

import ast
import subprocess
from functools import cache
from pathlib import Path

import memprobe
from memprobe.registry.systems import module_file

PACKAGE = Path(memprobe.__file__).resolve().parent
PLUMBING = (
    "memprobe.vocabulary",
    "memprobe.registry",
    "memprobe.config",
    "memprobe.spec.records",
    "memprobe.spec.prompts",
    "memprobe.llm",
    "memprobe.serving",
    "memprobe.agents",  # a system's own module is an input of its jobs (agent_module)
    "memprobe.testing",
    "memprobe.workflow",
)


@cache  # scripts share modules: each file is parsed once per DAG load (45 files, not 112)
def imported(path: Path) -> frozenset[str]:
    """Every dotted name a file imports absolutely: ``import a.b`` gives a.b; ``from a import
    b`` gives a and a.b (b may be a module or a name in a)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return frozenset(names)


def source(module: str) -> Path | None:
    """The file of a memprobe module (None: not one, or one installed from agents/)."""
    parts = module.split(".")
    if parts[0] != "memprobe" or module.startswith("memprobe.agents"):
        return None
    base = PACKAGE.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _plumbing(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in PLUMBING)


@cache
def logic_modules(script: str) -> tuple[str, ...]:
    """The logic modules ``script`` (a path) runs, sorted."""
    found: set[str] = set()
    todo = [Path(script)]
    while todo:
        for name in imported(todo.pop()):
            path = source(name)
            if path is None or path.name == "__init__.py" or _plumbing(name) or name in found:
                continue
            found.add(name)
            todo.append(path)
    return tuple(sorted(found))


def module_files(script: str) -> list[str]:
    """The files of ``script``'s logic modules, as rule inputs."""
    return [module_file(m) for m in logic_modules(script)]


# Where a job's ``import memprobe`` goes: its script runs as ``python scripts/<rule>.py``, so
# sys.path starts at scripts/ and then the interpreter's own (PYTHONPATH, the venv's installs).
_FIND = "import importlib.util as u; s = u.find_spec('memprobe'); print(s.origin if s else '')"


def jobs_package(python: str, checkout: Path) -> Path | None:
    """The folder of the memprobe package that ``python`` imports for a job's script in
    ``checkout`` (None: it imports none)."""
    scripts = checkout / "scripts"
    found = subprocess.run(
        [python, "-c", _FIND],
        cwd=scripts if scripts.is_dir() else checkout,
        capture_output=True,
        text=True,
        timeout=120,
    )
    origin = found.stdout.strip()
    return Path(origin).resolve().parent if found.returncode == 0 and origin else None


def foreign_code(checkout: Path, python: str) -> str | None:
    """One line where ``checkout`` holds a memprobe package but its jobs would import another
    checkout's (a venv installed from elsewhere); None where they run its own, or where it
    holds none (a copy of the workflow alone: the DAG then loads the installed package too)."""
    own = (checkout / "memprobe").resolve()
    if not (own / "__init__.py").is_file():
        return None
    runs = jobs_package(python, checkout)
    if runs is None or runs == own:
        return None
    return (
        f"{checkout}: its jobs would import the memprobe package at {runs} ({python}'s), not "
        "this checkout's memprobe/, so an edit here would rerun jobs that never run it; give "
        f"this checkout a venv of its own (pip install -e . in it) or run from {runs.parent}"
    )
