"""No code asks a backend or a memory system for its name: it asks its interface.

A backend (``llm.backend``) and a system (``systems:``) say what the run needs through their
interface (``memprobe.llm.providers.Backend``; ``memprobe.registry.systems.declare``), so a
plugin's gets everything a built-in's does. This reads every module of the package, the
agents, the rule scripts and the rule files, and fails where one compares a registered name
(``== "local"``, ``"memt" in cfg.systems``, ``match``), reads one's own block by name
(``cfg.llm.local``, ``cfg.system_settings.mem0``, ``getattr(..., "mem0")``), outside that
backend's or system's own module and the registry.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from memprobe.registry import backends
from memprobe.registry import systems as registry
from memprobe.registry.systems import module_file
from tests.helpers.workflow import ROOT

SOURCES = ("memprobe", "agents", "scripts")
RULE_FILES = ("Snakefile", "rules")
COMPARE = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
BLOCKS = {"llm": "backend", "system_settings": "system"}  # where a plugin's own block lives


def names() -> dict[str, str]:
    """Each registered name -> the file of its own module (relative to the repository)."""
    own = {n: backends.targets()[n][0].split(":")[0] for n in backends.names()}
    own |= {n: s.module for n, s in registry.specs().items()}
    return {n: str(Path(module_file(m)).resolve().relative_to(ROOT)) for n, m in own.items()}


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for e in node.elts for s in _strings(e)]
    return []


def branches(source: str, known: set[str]) -> list[tuple[int, str]]:
    """(line, name) of every comparison with, or by-name read of, a registered name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(isinstance(op, COMPARE) for op in node.ops):
            for side in (node.left, *node.comparators):
                found += [(node.lineno, s) for s in _strings(side) if s in known]
        elif isinstance(node, ast.MatchValue):
            found += [(node.lineno, s) for s in _strings(node.value) if s in known]
        elif isinstance(node, ast.Attribute) and node.attr in known:
            parent = node.value
            if isinstance(parent, ast.Attribute) and parent.attr in BLOCKS:
                found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
            if len(node.args) >= 2:
                found += [(node.lineno, s) for s in _strings(node.args[1]) if s in known]
    return sorted(found)


def rule_branches(text: str, known: set[str]) -> list[tuple[int, str]]:
    """The same in a rule file (Snakemake's syntax is not Python's): by its text."""
    alternatives = "|".join(map(re.escape, sorted(known)))
    quoted = rf"""["']({alternatives})["']"""
    patterns = (
        rf"(?:==|!=|\bin|\bnot in)\s*{quoted}",
        rf"{quoted}\s*(?:==|!=|\bin\b|\bnot in\b)",
        rf"\.(?:{'|'.join(BLOCKS)})\.({alternatives})\b",
        rf"getattr\([^,]+,\s*{quoted}",
    )
    found = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0]
        for p in patterns:
            found += [(n, m.group(1)) for m in re.finditer(p, code)]
    return found


def offenders(root: Path = ROOT) -> list[str]:
    own = names()
    known = set(own)
    allowed_everywhere = {"memprobe/registry"}
    out = []
    files = [p for d in SOURCES for p in sorted((root / d).rglob("*.py"))]
    rules = [root / "Snakefile", *sorted((root / "rules").glob("*.smk"))]
    for path in files + rules:
        rel = str(path.relative_to(root))
        if any(rel.startswith(a) for a in allowed_everywhere):
            continue
        text = path.read_text(encoding="utf-8")
        hits = rule_branches(text, known) if path in rules else branches(text, known)
        out += [f"{rel}:{line}: {name!r}" for line, name in hits if own[name] != rel]
    return out


def test_no_code_branches_on_a_backend_or_system_name_outside_its_own_module():
    found = offenders()
    assert not found, (
        "ask the backend or system through its interface (memprobe/llm/providers.py Backend, "
        "memprobe/registry/systems.py declare) instead of its name:\n" + "\n".join(found)
    )


def test_the_scan_sees_each_kind_of_name_branch():
    known = {"local", "memt", "mem0", "openai"}
    python = (
        'if cfg.llm.backend == "local": pass\n'
        'if "memt" in cfg.systems: pass\n'
        'if backend not in ("openai", "fake"): pass\n'
        "x = cfg.system_settings.mem0.hybrid_search\n"
        "y = cfg.llm.local.threads\n"
        'z = getattr(cfg.system_settings, "memt")\n'
        'match cfg.llm.backend:\n    case "openai":\n        pass\n'
        'ok = {"memt": 1}; threading.local(); name = "local"\n'  # data and other names pass
    )
    assert [n for _, n in branches(python, known)] == [
        "local", "memt", "openai", "mem0", "local", "memt", "openai"
    ]  # fmt: skip
    rule = (
        'if CFG.llm.backend == "local":\n'
        "    CFG.llm.local.jobs_at_once  # a comment may say == 'memt'\n"
        'x = "memt" in SYSTEMS\n'
    )
    assert rule_branches(rule, known) == [(1, "local"), (2, "local"), (3, "memt")]
