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

Every Snakemake reads the imports again: the one you start, and on a cluster two more per job,
each parsing some 45 files (a tenth of a second of CPU, beside the second or so Snakemake takes
to start). ``keep_imports_in`` (rules/common.smk) keeps each file's imports in the run's
``.snakemake/memprobe/imports.json`` under a hash of its text: a Snakemake that finds the same
text there reads its imports instead of parsing it; an edited file has another hash and is
parsed again.
"""

from __future__ import annotations

import ast
import hashlib
import json
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


class KeptImports:
    """The imports of the files this process read, by the hash of their text, in a JSON file
    that the next Snakemake reads (the run's ``.snakemake/memprobe/imports.json``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.known: dict[str, list[str]] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            self.known = {}
        self.used: dict[str, list[str]] = {}

    def get(self, key: str) -> list[str] | None:
        if key in self.known:
            self.used[key] = self.known[key]
        return self.used.get(key)

    def add(self, key: str, names: frozenset[str]) -> None:
        """Note a parsed file's imports and rewrite the file with those this process used (a
        Snakemake reads every rule's script, so the ones of earlier edits drop out)."""
        self.used[key] = sorted(names)
        from memprobe.spec.records import write_atomic

        try:
            write_atomic(self.path, json.dumps(self.used, sort_keys=True))
        except OSError:
            pass  # a folder we may not write: the next Snakemake parses again


_kept: KeptImports | None = None


def keep_imports_in(folder: Path) -> None:
    """Read and keep the files' imports in ``folder`` from now on (see the module's doc)."""
    global _kept
    _kept = KeptImports(folder / "imports.json")
    imported.cache_clear()


def _parse(text: str) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return frozenset(names)


@cache  # scripts share modules: each file is read once per DAG load (45 files, not 112)
def imported(path: Path) -> frozenset[str]:
    """Every dotted name a file imports absolutely: ``import a.b`` gives a.b; ``from a import
    b`` gives a and a.b (b may be a module or a name in a)."""
    text = path.read_text(encoding="utf-8")
    if _kept is None:
        return _parse(text)
    key = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
    known = _kept.get(key)
    if known is not None:
        return frozenset(known)
    names = _parse(text)
    _kept.add(key, names)
    return names


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
