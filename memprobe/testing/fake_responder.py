"""Deterministic, schema-valid replies to OpenAI chat requests (and embeddings), for dry runs
and tests.

The reply is derived from the request alone (hash of model, messages and seed), so the same
request always gets the same reply. For a ``response_format`` json_schema request the reply is
an instance built from that schema (enums, lengths, bounds, required keys honoured); otherwise
it is a short plain-text answer. This is never the backend of a real run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

_WORDS = (
    "careful planner prefers short steps likes checklists budget weekend garden notes "
    "practical calm direct examples morning routine family project deadline reading "
    "cooking repair spreadsheet travel patient curious"
).split()


def request_digest(body: dict[str, Any]) -> str:
    basis = {k: body.get(k) for k in ("model", "messages", "seed", "response_format")}
    blob = json.dumps(basis, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _num(digest: str, salt: str) -> int:
    return int(hashlib.sha256(f"{digest}:{salt}".encode()).hexdigest()[:12], 16)


def _text(digest: str, path: str, max_len: int | None, min_len: int = 0) -> str:
    n = _num(digest, path)
    words = [_WORDS[(n >> (4 * i)) % len(_WORDS)] for i in range(6)]
    text = f"{' '.join(words)} {digest[:6]}"
    if max_len is not None:
        text = text[:max_len].rstrip() or text[:max_len]
    if len(text) < min_len:
        text = text.ljust(min_len, "x")
    return text


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = defs[name]
    return schema


def instance(
    schema: dict[str, Any], digest: str, path: str = "$", defs: dict | None = None, slot: int = 0
) -> Any:
    """Build a value that validates against ``schema``; ``slot`` spreads enum picks in arrays."""
    defs = defs if defs is not None else schema.get("$defs", {})
    schema = _resolve(schema, defs)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        options = schema["enum"]
        return options[(_num(digest, path.split("[")[0]) + slot) % len(options)]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [s for s in schema[key] if _resolve(s, defs).get("type") != "null"]
            return instance((options or schema[key])[0], digest, path, defs, slot)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((t for t in kind if t != "null"), "null")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {
            name: instance(sub, digest, f"{path}.{name}", defs, slot) for name, sub in props.items()
        }
    if kind == "array":
        lo = schema.get("minItems", 1)
        hi = schema.get("maxItems", max(lo, 2))
        n = max(lo, min(hi, 2))
        items = schema.get("items", {"type": "string"})
        return [instance(items, digest, f"{path}[{i}]", defs, slot + i) for i in range(n)]
    if kind == "string":
        return _text(digest, path, schema.get("maxLength"), schema.get("minLength", 0))
    if kind in ("integer", "number"):
        lo = schema.get("minimum", 0)
        hi = schema.get("maximum", lo + 4)
        value = lo + _num(digest, path) % (int(hi - lo) + 1)
        return int(value) if kind == "integer" else float(value)
    if kind == "boolean":
        return _num(digest, path) % 2 == 0
    if kind == "null":
        return None
    return _text(digest, path, 40)


# A rigged outcome: in a json_schema reply, the top-level enum ``field`` takes ``value`` with
# this probability (fixed by the request), else one of its other options, evenly.
Outcomes = dict[str, tuple[str, float]]


def parse_outcomes(text: str) -> Outcomes:
    """``feedback_type=satisfied:0.4,verdict=neutral:1``."""
    out: Outcomes = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        field, _, rest = part.partition("=")
        value, _, rate = rest.rpartition(":")
        try:
            share = float(rate)
        except ValueError:
            share = -1.0
        if not field or not value or not 0 <= share <= 1:
            raise ValueError(f"outcomes: {part!r} is not FIELD=VALUE:RATE with RATE in [0, 1]")
        out[field] = (value, share)
    return out


def fake_content(body: dict[str, Any], outcomes: Outcomes | None = None) -> str:
    """The reply text for one chat-completions request body; ``outcomes`` rig enum fields
    (benchmarks make episodes end, and critics pass, as often as the release's did)."""
    digest = request_digest(body)
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = fmt["json_schema"]["schema"]
        reply = instance(schema, digest)
        for field, (value, rate) in (outcomes or {}).items():
            _rig(reply, schema, field, value, rate, digest)
        return json.dumps(reply, ensure_ascii=False)
    if fmt.get("type") == "json_object":
        return json.dumps({"facts": [_text(digest, "fact", 60)]})
    return f"Here is a practical answer: {_text(digest, 'reply', None)}."


def _rig(
    reply: Any, schema: dict[str, Any], field: str, value: str, rate: float, digest: str
) -> None:
    options = _resolve(schema.get("properties", {}).get(field, {}), schema.get("$defs", {}))
    options = options.get("enum", [])
    if not isinstance(reply, dict) or value not in options:
        return
    others = [o for o in options if o != value]
    draw = _num(digest, f"rig:{field}") / 16**12  # uniform in [0, 1), fixed by the request
    if draw < rate or not others:
        reply[field] = value
    else:
        reply[field] = others[_num(digest, f"rig:{field}:other") % len(others)]


def completion_body(body: dict[str, Any], content: str) -> dict[str, Any]:
    """Wrap reply text as an OpenAI chat.completion object with token usage."""
    prompt_chars = sum(len(str(m.get("content") or "")) for m in body.get("messages", []))
    prompt_tokens = max(1, prompt_chars // 4)
    completion_tokens = max(1, len(content) // 4)
    return {
        "id": f"fake-{request_digest(body)[:16]}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def embedding_body(body: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI embeddings reply: a unit vector per input text, derived from the text alone
    (``dimensions`` long, 8 when the request names none), with token usage."""
    texts = body.get("input") or []
    texts = [texts] if isinstance(texts, str) else list(texts)
    dims = int(body.get("dimensions") or 8)
    data = []
    for i, text in enumerate(texts):
        digest = hashlib.sha256(str(text).encode("utf-8")).digest()
        raw = [digest[j % len(digest)] / 255.0 - 0.5 + j / (10.0 * dims) for j in range(dims)]
        norm = sum(x * x for x in raw) ** 0.5 or 1.0
        data.append({"object": "embedding", "index": i, "embedding": [x / norm for x in raw]})
    tokens = sum(max(1, len(str(t)) // 4) for t in texts)
    return {
        "object": "list",
        "model": body.get("model", "fake"),
        "data": data,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
