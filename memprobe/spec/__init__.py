"""What the protocol is written in, below the LLM layer: the typed records every artifact is
(with their atomic writes), the CSV sheets people open, the prompt files and their syntax, the
judge's rubric and the category taxonomy. Nothing here calls an LLM or a memory system;
``memprobe.protocol`` builds its stages on these."""
