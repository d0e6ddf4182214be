"""MemProbe: audit what a memory-equipped LLM assistant retains about its users."""

__version__ = "0.1.0"

from memprobe.vocabulary import CATEGORIES, MODES  # noqa: E402  the package's short names

__all__ = ["CATEGORIES", "MODES", "__version__"]
