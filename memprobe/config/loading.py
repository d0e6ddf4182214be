"""Reading config files, merging them as Snakemake merges them, and validating the result.

Every reader of a config file comes here (the Snakefile, ``memprobe estimate``, ``memprobe
local-server``); an error is one line naming the key and the layer that set it.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from pydantic import ValidationError

from memprobe.config.base import ConfigError, KeyedError
from memprobe.config.schema import Config
from memprobe.registry import RegistryError, backends
from memprobe.registry import systems as registry


def _format_error(err: ValidationError) -> str:
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"] if p != "[key]")
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        msg = "required key is missing"
    elif first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "literal_error" and "[key]" in [str(p) for p in first["loc"]]:
        # the allowed keys of this mapping (categories, roles, ...), as pydantic lists them
        expected = first["ctx"]["expected"].replace("'", "")
        msg = f"unknown key; expected one of {expected}"
    return f"{loc}: {msg}" if loc else msg


def _plugins_registered() -> None:
    """Load the systems and backends (built-ins and plugins) first: a plugin that cannot
    register is its own one-line error, not blamed on a config file."""
    try:
        registry.specs()
        backends.targets()
    except RegistryError as err:
        raise ConfigError(str(err)) from None


# Keys that were renamed: the old name stops the run in one line that names the new one.
RENAMED = {"k": "top_k"}  # Snakemake's --config takes only keys of two or more letters


# Blocks that moved: the old place stops the run in one line that names the new one.
MOVED = {"memt": "system_settings.memt"}  # a system's settings live with the system's


def _no_renamed_key(raw: dict[str, Any], source: str) -> None:
    for old, new in RENAMED.items():
        if old in raw:
            raise ConfigError(
                f"{source}: {old}: renamed {new} (write {new}: {raw[old]}, or --config {new}=...)"
            )
    for old, new in MOVED.items():
        if old in raw:
            raise ConfigError(f"{source}: {old}: moved to {new} (the same keys, under it)")


def load_config(raw: dict[str, Any], source: str = "config") -> Config:
    """Validate Snakemake's merged config dict; raise ConfigError with one line."""
    _no_renamed_key(raw, source)
    _plugins_registered()
    try:
        return Config.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(f"{source}: {_format_error(err)}") from None


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """``tree[a][b][c] = value`` for ``key`` ``a.b.c``, making the mappings on the way."""
    *parents, leaf = key.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def snakemake_merge(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """The layers merged exactly as Snakemake merges a workflow's config.

    ``layers[0]`` is the Snakefile's ``configfile:``, the rest are Snakemake's overwrite
    config (each ``--configfile``, then ``--config``), folded together first. Snakemake's own
    ``update_config`` does every step, in its order (``ConfigSettings`` and
    ``Workflow.configfile``), so a case a hand-written merge would decide otherwise (``{}``
    over a scalar keeps the scalar) comes out as the jobs see it.
    """
    from snakemake.utils import update_config

    overwrite: dict[str, Any] = {}
    for layer in layers[1:]:
        update_config(overwrite, copy.deepcopy(layer))
    merged = copy.deepcopy(overwrite)
    if layers:
        update_config(merged, copy.deepcopy(layers[0]))
    update_config(merged, copy.deepcopy(overwrite))
    return merged


def _holds(raw: dict[str, Any], loc: tuple[Any, ...]) -> bool:
    node: Any = raw
    for part in loc:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """One YAML config file as a mapping, or a ConfigError naming the file (and the line).

    Every reader of a config file comes here (the Snakefile, ``memprobe estimate``,
    ``memprobe local-server``): a key twice in one mapping is refused (YAML loaders keep the
    last one silently, so half of a config would be ignored without a word), and so is a key
    that is not a plain value (a list or mapping as a key)."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.load(fh, Loader=_strict_loader(str(path))) or {}  # noqa: S506  safe
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        why = " ".join(str(err).split())  # YAML's messages span lines
        raise ConfigError(f"{path}: cannot read a YAML config ({why})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys")
    return data


def _strict_loader(path: str) -> Any:
    """A SafeLoader that refuses repeated and unhashable mapping keys in ``path``."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def mapping(loader: Loader, node: yaml.MappingNode) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node)
            where = f"{path}: line {key_node.start_mark.line + 1}"
            try:
                repeated = key in seen
            except TypeError:
                raise ConfigError(
                    f"{where}: a key must be a plain value, not a {type(key).__name__}"
                ) from None
            if repeated:
                raise ConfigError(f"{where}: key {key!r} appears twice")
            seen.add(key)
        return loader.construct_mapping(node)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def load_layers(layers: list[tuple[str, dict[str, Any]]]) -> Config:
    """Validate config layers (name, mapping) merged as Snakemake merges them
    (``snakemake_merge``: the first is the Snakefile's configfile)."""
    return validate(snakemake_merge([layer for _, layer in layers]), layers)


def validate(raw: dict[str, Any], layers: list[tuple[str, dict[str, Any]]]) -> Config:
    """Validate the merged config ``raw`` (Snakemake's own, at DAG load: the very dict the
    jobs read), blaming an error on the layer that set the offending key.

    A ``--config`` typo is blamed on ``--config``, not on config/config.yaml; a missing key
    or a cross-key rule names them all.
    """
    for name, layer in layers:
        _no_renamed_key(layer, name)
    _plugins_registered()
    try:
        return Config.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        loc = tuple(p for p in first["loc"] if p != "[key]" and not isinstance(p, int))
        cause = (first.get("ctx") or {}).get("error")
        if isinstance(cause, KeyedError):  # a whole-config check that names one key
            loc = tuple(cause.key.split("."))
        setters = [name for name, layer in layers if loc and _holds(layer, loc)]
        source = setters[-1] if setters else " + ".join(name for name, _ in layers)
        raise ConfigError(f"{source}: {_format_error(err)}") from None


# The Snakefile's ``configfile:``: the base every --configfile and --config is layered on.
WORKFLOW_CONFIG = "config/config.yaml"


def load_files(configfiles: list[str], overrides: dict[str, Any] | None = None) -> Config:
    """The run's config as ``snakemake --configfile FILE... --config ...`` builds it, for the
    commands that read it outside Snakemake (``memprobe estimate``, ``local-server``, ...)."""
    files = [WORKFLOW_CONFIG, *(f for f in configfiles if f != WORKFLOW_CONFIG)]
    layers = [(f, read_config_file(f)) for f in files]
    if overrides:
        layers.append(("--config", overrides))
    return load_layers(layers)
