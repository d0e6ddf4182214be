"""Runs of words the prompt files share with the release's code strings
(memprobe/release/shared_words.py): the finder, the release's strings, the stored hashes, and
the check itself on prompts/ against those hashes (against the release itself with
MEMPROBE_RELEASE_DIR)."""

from __future__ import annotations

import os

import pytest

from memprobe import cli
from memprobe.release import shared_words as sw
from memprobe.spec.records import RecordError
from tests.helpers.workflow import ROOT

HASHES = ROOT / "tests" / "fixtures" / "release_shingles.txt"
SOURCE = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"


def known(*texts: str, n: int = 12) -> set[str]:
    return {sw.run_hash(" ".join(w[i : i + n])) for t in texts for w in [sw.words(t)]
            for i in range(len(w) - n + 1)}  # fmt: skip


def test_a_shared_run_is_found_whole_across_case_punctuation_and_line_breaks():
    ours = (
        "Intro: One, two three\nfour -- FIVE six seven eight nine ten eleven twelve thirteen! End"
    )
    assert sw.shared_runs([("ours.md", ours)], known(SOURCE)) == [
        sw.Shared("ours.md", 13, " ".join(SOURCE.split()[:13]))
    ]


def test_a_run_one_word_short_of_n_is_not_shared():
    ours = "one two three four five six seven eight nine ten eleven zzz twelve"
    assert sw.shared_runs([("ours.md", ours)], known(SOURCE)) == []
    assert sw.shared_runs([("ours.md", ours)], known(SOURCE, n=11), n=11) == [
        sw.Shared("ours.md", 11, " ".join(SOURCE.split()[:11]))
    ]


def test_the_release_strings_are_every_literal_of_every_python_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.py").write_text(
        '"""A docstring."""\nPROMPT = ("joined " "pieces")\nf"an f-string {x} with text"\nn = 3\n'
    )
    (tmp_path / "notes.md").write_text("not code")
    got = [text for _, text in sw.release_strings(tmp_path)]
    assert got[0] == "A docstring." and "joined pieces" in got
    assert "an f-string   with text" in got and len(got) == 3  # its parts once, not again
    (tmp_path / "b.py").write_text("print 'python 2'\n")
    with pytest.raises(RecordError, match=r"b.py: not Python"):
        list(sw.release_strings(tmp_path))


def test_the_hashes_file_round_trips_and_a_bad_line_is_one_error(tmp_path):
    path = tmp_path / "hashes.txt"
    hashes = known(SOURCE)
    path.write_text(sw.hashes_file(hashes, 12))
    assert sw.read_hashes(path) == hashes
    path.write_text(sw.hashes_file(hashes, 12) + "not-a-hash\n")
    with pytest.raises(RecordError, match=r"hashes.txt: 'not-a-hash' is not a 12-character"):
        sw.read_hashes(path)


def test_the_command_exits_1_and_lists_a_shared_run(tmp_path, capsys):
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    (prompts / "p.md").write_text(f"Before. {SOURCE}. After.")
    hashes = tmp_path / "hashes.txt"
    hashes.write_text(sw.hashes_file(known(SOURCE), 12))
    assert cli.main(["shared-words", "--hashes", str(hashes), "--prompts", str(prompts)]) == 1
    assert f"p.md: 14 words: {SOURCE}" in capsys.readouterr().out
    assert cli.main(["shared-words", "--prompts", str(prompts)]) == 1
    assert "give the release (--release DIR) or its stored hashes" in capsys.readouterr().err


def test_no_prompt_file_shares_12_words_with_the_release_strings(capsys):
    """The stored hashes: the release's sentences are not in our prompts (issue 43)."""
    hashes = sw.read_hashes(HASHES)
    assert len(hashes) > 10_000  # the release's strings, not an empty file
    assert sw.shared_runs(sw.prompt_texts(ROOT / "prompts"), hashes) == []
    assert cli.main(["shared-words", "--hashes", str(HASHES),
                     "--prompts", str(ROOT / "prompts")]) == 0  # fmt: skip
    assert "no prompt file shares a run of 12 words" in capsys.readouterr().out


RELEASE_ENV = "MEMPROBE_RELEASE_DIR"


@pytest.mark.skipif(
    not os.environ.get(RELEASE_ENV),
    reason=f"set {RELEASE_ENV} to a checkout of the authors' release to rehash its strings",
)
def test_the_stored_hashes_are_the_releases():
    assert sw.release_hashes(os.environ[RELEASE_ENV]) == sw.read_hashes(HASHES)
