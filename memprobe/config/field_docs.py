"""A config model's field docstrings (the string under a field): each key's meaning in
docs/configuration.md. Read from the model's source when the reference asks, not at import:
pydantic's ``use_attribute_docstrings`` parses each model's source as the class is made, in
every process that imports the config (each job, each job step's Snakemake), ~0.15 s of CPU
apiece for a reference only ``memprobe config-reference`` writes."""

from __future__ import annotations

import ast
import inspect
import textwrap
from functools import cache

from pydantic import BaseModel


@cache
def _own(cls: type) -> dict[str, str]:
    """The docstrings under the annotated fields of ``cls``'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # made at run time (create_model): no source
        return {}
    body = ast.parse(source).body[0]
    if not isinstance(body, ast.ClassDef):
        return {}
    docs = {}
    for node, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def description(model: type[BaseModel], name: str) -> str | None:
    """Field ``name``'s meaning: its ``Field(description=...)``, else the docstring under it in
    the nearest class of ``model``'s MRO that has one."""
    given = model.model_fields[name].description
    if given:
        return given
    for cls in model.__mro__:
        if doc := _own(cls).get(name):
            return doc
    return None
