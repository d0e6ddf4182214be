"""CSV files people open in a spreadsheet: no cell is ever read as a formula.

A spreadsheet evaluates a cell that starts with ``=``, ``+``, ``-`` or ``@`` (and, in some, a
tab or carriage return) as a formula, so a judge's reason, an imported label or a transcript
line could run ``=HYPERLINK(...)`` or worse when a person opens our CSV. Such a text cell is
written with a leading ``'``, which spreadsheets show as text and hide; numbers (also a
negative number written as text, ``-0.25``) are left as they are. Every CSV a person opens
is written through here (tables, judge calibration, audit agreement); the audit page's own
sheet applies the same rule in its script, and :func:`read_cell` undoes it on the way back.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def safe_cell(value: Any) -> Any:
    """``value`` as a spreadsheet shows it without evaluating it (non-text values unchanged)."""
    if isinstance(value, str) and value.startswith(TRIGGERS) and not _NUMBER.match(value):
        return "'" + value
    return value


def read_cell(text: str) -> str:
    """A cell read back from a sheet we (or the audit page) wrote: the ``'`` guard removed."""
    if text.startswith("'") and text[1:].startswith(TRIGGERS):
        return text[1:]
    return text


def csv_text(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> str:
    """Rows (dicts) as CSV text with a header, every cell guarded."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows({k: safe_cell(v) for k, v in row.items()} for row in rows)
    return out.getvalue()


def frame_csv(df: pd.DataFrame) -> str:
    """A table as CSV text (as ``df.to_csv(index=False)``), every text cell guarded."""
    return df.map(safe_cell).to_csv(index=False)
