"""A stand-in for memprobe.llm.client.LLM that records every request and answers from a function."""

from __future__ import annotations

import json

from memprobe.llm.salvage import Exhausted


class RecordingLLM:
    def __init__(self, answer) -> None:
        self.answer = answer  # (messages, schema) -> dict
        self.requests: list[list[dict[str, str]]] = []
        self.wheres: list[str] = []  # what each call names in its error lines

    def json(self, messages, schema, *, check=None, sample=0, where="", stand_in=None):
        self.requests.append(messages)
        self.wheres.append(where)
        answer = self.answer(messages, schema)
        reply = schema.model_validate(answer)
        if check is not None:  # the real client re-asks, then stands in or fails loudly
            try:
                check(reply)
            except ValueError as err:
                if stand_in is None:
                    raise
                spent = Exhausted("recording", where, str(err), [json.dumps(answer)])
                return stand_in(spent)
        return reply

    def map(self, fn, items):
        return [fn(x) for x in items]

    def prompt_text(self, i: int) -> str:
        return "\n".join(m["content"] for m in self.requests[i])

    @staticmethod
    def dumps(obj) -> str:
        return json.dumps(obj)
