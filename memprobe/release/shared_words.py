"""Runs of words our prompt files share with the release's code strings (issue 43).

The facts of the release's prompts carry over into ours, its sentences do not
(docs/fidelity.md). This finds every run of at least ``n`` consecutive words (default 12)
that a file under ``prompts/`` shares with a string literal of the release's Python code
(every ``*.py`` under the release, docstrings and f-string text included). Words are runs of
letters, digits and apostrophes, lower-cased, so punctuation, markup and line breaks do not
hide a copied sentence.

Without the release the same check runs against stored hashes of the release strings'
``n``-word runs (``memprobe shared-words --release DIR --write-hashes FILE`` writes them;
``tests/fixtures/release_shingles.txt`` holds the 12-word ones): a hash names a run without
holding its words, so no release sentence lands in the repository.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from memprobe.spec.records import RecordError

WORDS = 12
HASH_CHARS = 12  # 48 bits: no chance collision among a few ten thousand runs
_WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _runs(ws: list[str], n: int) -> Iterator[tuple[int, str]]:
    for i in range(len(ws) - n + 1):
        yield i, " ".join(ws[i : i + n])


def run_hash(run: str) -> str:
    return hashlib.sha256(run.encode("utf-8")).hexdigest()[:HASH_CHARS]


def _literal_text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):  # an f-string: its text, a gap where a value goes
        return " ".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
    return None


def release_strings(release_dir: str | Path) -> Iterator[tuple[Path, str]]:
    """Every string literal of every ``*.py`` under ``release_dir`` (a file that does not
    parse is an error naming it: a check that skipped it would pass for the wrong reason)."""
    files = sorted(Path(release_dir).rglob("*.py"))
    if not files:
        raise RecordError(f"{release_dir}: no *.py files (is it the release?)")
    for path in files:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError as err:
            raise RecordError(f"{path}: not Python ({err.msg}, line {err.lineno})") from None
        in_fstring = {
            id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values
        }
        for node in ast.walk(tree):
            text = None if id(node) in in_fstring else _literal_text(node)
            if text:
                yield path, text


def release_hashes(release_dir: str | Path, n: int = WORDS) -> set[str]:
    """The hashes of every ``n``-word run of the release's code strings."""
    return {
        run_hash(run)
        for _, text in release_strings(release_dir)
        for _, run in _runs(words(text), n)
    }


class Shared(NamedTuple):
    """A maximal run of a prompt file's words that is made of shared ``n``-word runs."""

    file: str
    length: int  # words
    text: str  # the run, as our file's words


def shared_runs(texts: Iterable[tuple[str, str]], known: set[str], n: int = WORDS) -> list[Shared]:
    """The maximal runs of at least ``n`` words of each (name, text) whose every ``n``-word
    window's hash is in ``known``, longest first."""
    found = []
    for name, text in texts:
        ws = words(text)
        covered = [False] * len(ws)
        for i, run in _runs(ws, n):
            if run_hash(run) in known:
                covered[i : i + n] = [True] * n
        i = 0
        while i < len(ws):
            if not covered[i]:
                i += 1
                continue
            j = i
            while j < len(ws) and covered[j]:
                j += 1
            found.append(Shared(name, j - i, " ".join(ws[i:j])))
            i = j
    return sorted(found, key=lambda s: (-s.length, s.file))


def prompt_texts(prompts_dir: str | Path) -> list[tuple[str, str]]:
    files = sorted(p for p in Path(prompts_dir).rglob("*") if p.is_file())
    if not files:
        raise RecordError(f"{prompts_dir}: no prompt files")
    return [(str(p), p.read_text(encoding="utf-8")) for p in files]


def read_hashes(path: str | Path) -> set[str]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    hashes = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    bad = next((h for h in hashes if not re.fullmatch(f"[0-9a-f]{{{HASH_CHARS}}}", h)), None)
    if bad is not None:
        raise RecordError(f"{path}: {bad!r} is not a {HASH_CHARS}-character hex hash")
    return hashes


def hashes_file(hashes: set[str], n: int) -> str:
    head = (
        f"# sha256 (first {HASH_CHARS} hex characters) of every {n}-word run of the string\n"
        "# literals in the authors' release's *.py files (memprobe/release/shared_words.py):\n"
        "# the runs' names without their words. Rewrite from a release checkout with\n"
        f"#   memprobe shared-words --release RELEASE_DIR --words {n} --write-hashes FILE\n"
    )
    return head + "".join(f"{h}\n" for h in sorted(hashes))


def report(shared: list[Shared], n: int, where: str) -> str:
    if not shared:
        return f"no prompt file shares a run of {n} words with {where}"
    lines = [f"{len(shared)} run(s) of {n}+ words shared with {where}:"]
    lines += [f"  {s.file}: {s.length} words: {s.text}" for s in shared]
    return "\n".join(lines)
