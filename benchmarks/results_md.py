"""benchmarks/RESULTS.md's generated section, made from the records in benchmarks/results/.

    python benchmarks/results_md.py          # rewrite the section between the markers
    python benchmarks/results_md.py --check  # exit 1 where the section differs from the records

Each benchmark writes its figures as one JSON record (benchmarks/bench_record.py); this script
is the only writer of the table, so the figures in RESULTS.md are the records' own. The prose
below the section (the history before the records) is left as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_record  # noqa: E402

RESULTS_MD = bench_record.ROOT / "benchmarks" / "RESULTS.md"
BEGIN = "<!-- begin: made by `python benchmarks/results_md.py` from benchmarks/results/*.json -->"
END = "<!-- end: made by benchmarks/results_md.py -->"

# The table's columns: a heading and how a record's fields give the cell.
COLUMNS: tuple[tuple[str, Any], ...] = (
    ("name", lambda r: f"`{r['name']}`"),
    ("executor", lambda r: r["executor"]),
    ("users × systems", lambda r: f"{r['users']} × {len(r['systems'] or [])}"),
    ("RPM", lambda r: _num(r["rpm"])),
    ("wall s", lambda r: _num(r["wall_s"])),
    ("wall ÷ bound", lambda r: _ratio(r["wall_s"], r["bound_s"])),
    ("window min", lambda r: _num(r["window_s"] and r["window_s"] / 60, 1)),
    ("admitted/min", lambda r: _admitted(r["admitted_per_min"], r["rpm"])),
    ("429 share", lambda r: _pct(r["share_429"])),
    ("calls lost", lambda r: _num(r["calls_lost"])),
    ("CPU ms/paid call", lambda r: _num(r["cpu_ms_per_paid_call"], 1)),
    ("peak RSS MiB", lambda r: _num(r["peak_rss_mib"])),
    ("commit", lambda r: f"`{r['commit']}`"),
)


class RecordError(ValueError):
    pass


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _ratio(a: float | None, b: float | None) -> str:
    return "–" if a is None or not b else f"{a / b:.2f}×"


def _pct(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:.2f}%"


def _admitted(per_min: float | None, rpm: int | None) -> str:
    if per_min is None:
        return "–"
    return f"{per_min:,.0f}" + (f" ({100 * per_min / rpm:.0f}%)" if rpm else "")


def load(directory: Path) -> list[dict[str, Any]]:
    """The records, oldest first (by their date, then name); one that lacks a field of
    ``bench_record.FIELDS`` or is no JSON object stops with the file's name."""
    out = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise RecordError(f"{path}: not JSON ({err})") from None
        if not isinstance(record, dict):
            raise RecordError(f"{path}: expected a JSON object (one benchmark record)")
        missing = [f for f in bench_record.FIELDS if f not in record]
        if missing:
            raise RecordError(f"{path}: missing field(s) {', '.join(missing)}")
        out.append(record)
    return sorted(out, key=lambda r: ((r.get("machine") or {}).get("date_utc", ""), r["name"]))


def section(records: list[dict[str, Any]]) -> str:
    """The generated section: a table (one row per record), then each record's note and the
    command that reproduces it."""
    head = [h for h, _ in COLUMNS]
    lines = [
        BEGIN,
        "",
        "## Records (benchmarks/results/)",
        "",
        "One row per record; the CPU and the admitted rate are over the steady window where a",
        "record has one (`window min`), else over the whole run. Each record's note, below the",
        "table, says what it is (a short pass while developing is not one of an issue's runs).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    lines += ["| " + " | ".join(cell(r) for _, cell in COLUMNS) + " |" for r in records]
    if not records:
        lines.append("| " + " | ".join("–" for _ in head) + " |")
    lines.append("")
    for r in records:
        m = r.get("machine") or {}
        where = f"{m.get('cpus', '?')} cores, load {m.get('load_average_at_end', '?')} at the end"
        when = m.get("date_utc", "undated")
        note = f" {r['note']}" if r.get("note") else ""
        lines += [f"- `{r['name']}` ({when} UTC, {where}).{note}", f"  `{r['command']}`"]
    return "\n".join([*lines, "", END])


def render(text: str, records: list[dict[str, Any]]) -> str:
    """``text`` (RESULTS.md) with its generated section replaced (or put after the title)."""
    new = section(records)
    if BEGIN in text and END in text:
        before, rest = text.split(BEGIN, 1)
        return before + new + rest.split(END, 1)[1]
    title, _, body = text.partition("\n\n")
    return f"{title}\n\n{new}\n\n{body}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 where RESULTS.md is stale")
    ap.add_argument("--results", type=Path, default=bench_record.RESULTS_DIR)
    ap.add_argument("--md", type=Path, default=RESULTS_MD)
    args = ap.parse_args(argv)
    try:
        records = load(args.results)
    except RecordError as err:
        print(f"results_md: {err}", file=sys.stderr)
        return 2
    text = args.md.read_text(encoding="utf-8")
    new = render(text, records)
    if args.check:
        if new != text:
            print(
                f"results_md: {args.md} differs from {args.results}/*.json; run "
                "python benchmarks/results_md.py",
                file=sys.stderr,
            )
            return 1
        return 0
    if new != text:
        args.md.write_text(new, encoding="utf-8")
    print(f"results_md: {len(records)} record(s) in {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
