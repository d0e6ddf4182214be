"""MemProbe: audit what a memory-equipped LLM assistant retains about its users."""

__version__ = "0.1.0"

CATEGORIES: tuple[str, ...] = (
    "skill_memory",
    "knowledge_memory",
    "episodic_memory",
    "self_model",
    "assistance_preference",
)
MODES: tuple[str, ...] = ("dump_all", "retrieve")
