"""What a figure shows of a failed judge: its red band and its PNG Description."""

from __future__ import annotations

from pathlib import Path

from memprobe.report import figures


def flag_band(path: Path) -> tuple[int, str | None]:
    """Pixels of the flag's red in the figure's top eighth, and the PNG's Description."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as img:
        pixels = np.asarray(img.convert("RGB"), dtype=int)
        described = img.info.get("Description")
    red = np.array([int(figures.FLAG_COLOUR[i : i + 2], 16) for i in (1, 3, 5)])
    top = pixels[: pixels.shape[0] // 8]
    return int((np.abs(top - red).sum(axis=2) < 30).sum()), described
