"""Mem-T's tool calls and vector store (agents/memt_store.py, memt's part)."""

from __future__ import annotations

from memprobe.agents.memt_store import (
    EMBED_RECENT,
    FORMATION_TOOLS,
    RETRIEVE_TOOLS,
    UPDATE_TOOLS,
    VectorStore,
    parse_tool_calls,
)

from memprobe.serving import embeddings
from tests.helpers.paper import text_vectors


def test_parse_tool_calls_keeps_good_calls_and_counts_bad_ones():
    text = (
        '<tool_call>{"name": "create_fact", "arguments": {"content": "likes tea"}}</tool_call>\n'
        '<tool_call>{"name": "create_fact", "arguments": {"content": </tool_call>\n'
        '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "update_persona", "arguments": "{\\"name\\": \\"User\\", '
        '\\"content\\": \\"x\\"}"}</tool_call>\n'
        '<tool_call>{"name": "update_summary", "arguments": [1]}</tool_call>\n'
        '<tool_call>{"name": "create_experience", "arguments": {"content": "moved"}}'
    )
    calls, bad = parse_tool_calls(text, FORMATION_TOOLS)
    assert [c.name for c in calls] == ["create_fact", "update_persona", "create_experience"]
    assert calls[1].arguments == {"name": "User", "content": "x"}
    assert calls[2].arguments == {"content": "moved"}  # trailing block without closing tag
    assert bad == 3
    assert parse_tool_calls("no tools here", UPDATE_TOOLS) == ([], 0)
    # A tool of another phase is malformed here.
    assert parse_tool_calls(text, RETRIEVE_TOOLS)[0] == []


def test_a_text_asked_again_is_not_encoded_again_and_its_vector_is_the_same(monkeypatch):
    # The ReAct loop asks each collection with the same query: one encode, not four.
    sent: list[str] = []

    def encode(texts, path=None, max_seq_length=None):
        sent.extend(texts)
        return text_vectors(texts)

    monkeypatch.setattr(embeddings, "encode", encode)
    store = VectorStore(None)
    for col in ("facts", "experiences"):
        store.upsert(col, "x1", "the user keeps bees", {"memory_content": "bees"})
    for col in ("facts", "experiences", "personas", "summary"):
        store.query(col, "what does the user keep", 3)
    assert sent.count("what does the user keep") == 1
    assert sent.count("bees") == 1  # its content (no embed_source), stored in two collections
    again = store.embed("what does the user keep")
    assert (again == text_vectors(["what does the user keep"])[0]).all()
    for i in range(EMBED_RECENT):  # the oldest is forgotten past the bound
        store.embed(f"text {i}")
    store.embed("what does the user keep")
    assert sent.count("what does the user keep") == 2
