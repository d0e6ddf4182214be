"""The case inspector and the audit sheet, built by the real workflow and used in a real browser.

The browser tests drive headless Chromium (Debian's `chromium` package, installed by .ci/run)
through Playwright's Python API. Where Chromium is absent they are skipped with a loud reason
and a warning, never silently.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from memprobe.report import audit, inspect_site
from tests.helpers.release_fixture import USERS, release_config
from tests.helpers.workflow import Workflow, tiny_config

CHROMIUM = Path("/usr/bin/chromium")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # the dev extra not installed
    sync_playwright = None
NO_BROWSER = (
    "NO BROWSER: the inspector's browser tests did NOT run: "
    + ("playwright is not installed (pip install -e '.[dev]')" if sync_playwright is None else "")
    + ("" if CHROMIUM.exists() else " /usr/bin/chromium is missing (apt-get install -y chromium)")
)
HAVE_BROWSER = sync_playwright is not None and CHROMIUM.exists()
if not HAVE_BROWSER:
    warnings.warn(NO_BROWSER, stacklevel=1)


def needs_browser(test):
    """`-m browser` selects these; without Chromium they skip with NO_BROWSER as the reason."""
    return pytest.mark.browser(pytest.mark.skipif(not HAVE_BROWSER, reason=NO_BROWSER)(test))


MEMPROBE = str(Path(sys.executable).with_name("memprobe"))
DIMS = 8  # the fixture's bank: 2/2/2/1/1


@pytest.fixture(scope="module")
def release_wf(tmp_path_factory) -> Workflow:
    """The release fixture imported and inspected by real Snakemake (no LLM call)."""
    root = tmp_path_factory.mktemp("inspect") / "wf"
    root.mkdir()
    wf = Workflow(root, release_config())
    wf.run("inspector")
    return wf


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM))
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    ctx.close()
    assert not errors, errors


def open_page(page, path: Path) -> None:
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", state="attached", timeout=10000)


def table_rows(page) -> list[list[str]]:
    return page.eval_on_selector_all(
        "#cases tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )


def test_page_json_cannot_end_its_script_element():
    text = inspect_site.page_json({"x": "</script><script>alert(1)</script><!-- &"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"x": "</script><script>alert(1)</script><!-- &"}


@pytest.mark.workflow
def test_one_page_per_case_and_the_index_holds_no_transcript(release_wf):
    site = release_wf.results / "inspect"
    assert len(list((site / "cases").glob("*.html"))) == len(USERS) * DIMS
    index = (site / "index.html").read_text()
    # Case data stays on the case pages: no reply text in the index.
    assert "Agent reply" not in index
    assert (
        "Agent reply 1 in episode 5 for user_001." in (site / "cases/user_001_04.html").read_text()
    )
    entry = (release_wf.results / "inspect.html").read_text()
    assert 'href="inspect/index.html"' in entry


@needs_browser
def test_index_filters_and_sorts(release_wf, page, tmp_path):
    open_page(page, release_wf.results / "inspect" / "index.html")
    assert page.inner_text("#count") == f"{len(USERS) * DIMS} of {len(USERS) * DIMS} cases"
    assert "memt · dump_all B = 0.18" in page.inner_text("#summary")
    page.screenshot(path=str(tmp_path / "index.png"))

    # Filter: one system's columns; then a label; then a score range.
    page.select_option("#f-system", "memt")
    heads = page.eval_on_selector_all("#cases th", "hs => hs.map(h => h.innerText)")
    assert heads[4:] == ["memt · dump_all", "memt · retrieve"]
    page.select_option("#f-label", "task_design_failure")
    assert {r[2] for r in table_rows(page)} == {"relocation_event"}
    assert len(table_rows(page)) == len(USERS)
    page.select_option("#f-label", "")
    page.select_option("#f-mode", "dump_all")
    page.fill("#f-min", "0.75")
    rows = table_rows(page)
    assert rows and all(float(r[4].split()[0]) >= 0.75 for r in rows)
    assert len(rows) == 2  # memt dump_all: only user_001's two skill dims score 1

    # Sort by a score column, both directions.
    page.fill("#f-min", "")
    page.select_option("#f-system", "longctx_full")
    page.click("th[data-key='1']")
    scores = [float(r[4].split()[0]) for r in table_rows(page)]
    assert scores == sorted(scores) and scores[0] < scores[-1]
    page.click("th[data-key='1']")
    assert [float(r[4].split()[0]) for r in table_rows(page)] == sorted(scores, reverse=True)


@needs_browser
def test_case_page_shows_transcript_and_judge_reason(release_wf, page, tmp_path):
    results = release_wf.results
    open_page(page, results / "inspect" / "index.html")
    page.click("text=legal_or_administrative_event >> nth=0")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    assert page.url.endswith("cases/user_001_04.html")
    page.screenshot(path=str(tmp_path / "case.png"), full_page=True)
    col = page.locator("[data-system='longctx_full']")
    episode = json.loads((results / "longctx_full/user_001/episodes.json").read_text())["episodes"][
        4
    ]
    for turn in episode["turns"]:
        assert turn["agent_response"] in col.inner_text()
        assert turn["user_text"] in col.inner_text()
    judge = json.loads((results / "longctx_full/user_001/retrieve/judge.json").read_text())
    detail = next(d for d in judge["details"] if d["dimension"] == "legal_or_administrative_event")
    box = col.locator("[data-mode='retrieve']")
    assert box.locator(".judge-reason").inner_text() == f"reason: {detail['judge_reason']}"
    assert f"score {detail['score']:.2f}" in box.inner_text()
    assert "label: memory_failure" in box.inner_text()  # the attribution, with its stages
    assert "disclosure: disclosed: true" in box.inner_text()


@needs_browser
def test_model_text_is_shown_as_text_never_run(release_wf, page, tmp_path):
    """Model output is untrusted: markup in a reply or a target stays text on every page."""
    results = tmp_path / "results"
    shutil.copytree(release_wf.results, results)
    evil = '<img src=x onerror="window.pwned=1"></script><script>window.pwned=2</script>'
    path = results / "nomem/user_001/episodes.json"
    eps = json.loads(path.read_text())
    eps["episodes"][0]["turns"][0]["agent_response"] = evil
    path.write_text(json.dumps(eps))
    path = results / "users/user_001/bank.json"
    bank = json.loads(path.read_text())
    bank["entries"][0]["short"] = evil
    path.write_text(json.dumps(bank))
    pairs = [("nomem", "dump_all"), ("longctx_full", "dump_all"), ("longctx_full", "retrieve")]
    inspect_site.build(results, tmp_path / "site", list(USERS), ["nomem", "longctx_full"], pairs, 5)
    for p in ("index.html", "cases/user_001_00.html"):
        open_page(page, tmp_path / "site" / p)
        assert page.evaluate("window.pwned") is None
        assert page.locator("img").count() == 0
        assert evil in page.inner_text("#app")


def other_run_of(results: Path, root: Path, label: str, truth: str = "") -> list[dict]:
    """Another run's judge records (compare.runs): the fixture's memt dump_all records, with
    user_001's legal_or_administrative_event relabelled (and ``truth`` for its truth)."""
    judges = []
    for user in USERS:
        raw = json.loads((results / "memt" / user / "dump_all" / "judge.json").read_text())
        for d in raw["details"]:
            if user == "user_001" and d["dimension"] == "legal_or_administrative_event":
                d.update(predicted=label, score=0.75, ground_truth=truth or d["ground_truth"])
        path = root / "other" / "memt" / user / "dump_all" / "judge.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(raw))
        judges.append(str(path))
    return [{"name": "other", "scored": "", "judges": judges}]


@needs_browser
def test_case_page_sets_a_compared_runs_label_and_score_beside_this_runs(
    release_wf, page, tmp_path
):
    results = release_wf.results
    evil = '<img src=x onerror="window.pwned=1">a label'
    compared = other_run_of(results, tmp_path, evil)
    pairs = [("longctx_full", "dump_all"), ("longctx_full", "retrieve")]
    site = tmp_path / "site"
    inspect_site.build(
        results, site, list(USERS), ["longctx_full"], pairs, 5, run="mine", compared=compared
    )
    open_page(page, site / "cases/user_001_04.html")
    heads = page.eval_on_selector_all("#compared th", "hs => hs.map(h => h.innerText)")
    assert heads == ["run", "system", "dump_all", "retrieve"]
    rows = page.eval_on_selector_all(
        "#compared tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
    )
    judge = json.loads((results / "longctx_full/user_001/dump_all/judge.json").read_text())
    mine = next(d for d in judge["details"] if d["dimension"] == "legal_or_administrative_event")
    assert rows[0][:3] == [
        "mine (this run)",
        "longctx_full",
        f"{mine['score']:.2f} {mine['predicted']}",
    ]
    assert rows[1] == ["other", "memt", f"0.75 {evil}", "–"]  # the text as text; no retrieve
    assert page.evaluate("window.pwned") is None and page.locator("img").count() == 0

    # Another person under the same name (another truth): no cell of theirs is shown.
    other_site = tmp_path / "other_truth"
    shutil.rmtree(tmp_path / "other")
    compared = other_run_of(results, tmp_path, "x", truth="someone else's")
    inspect_site.build(
        results, other_site, list(USERS), ["longctx_full"], pairs, 5, run="mine", compared=compared
    )
    open_page(page, other_site / "cases/user_001_04.html")
    assert page.locator("#compared tbody tr").count() == 1  # this run's row alone
    # without compare.runs the page has no such box
    open_page(page, results / "inspect/cases/user_001_04.html")
    assert page.locator("#compared").count() == 0


@needs_browser
def test_the_report_links_the_inspector(release_wf, page):
    release_wf.run("tables")
    release_wf.run("--report", release_wf.target("report.html"))
    page.goto((release_wf.results / "report.html").as_uri())
    page.click("text=Inspector")
    row = page.locator("tr", has_text=release_wf.target("inspect.html"))
    row.locator("a[iconname='information-circle']").click()  # the item's caption
    page.click("a[href='inspect/index.html']")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    assert page.url == (release_wf.results / "inspect/index.html").as_uri()
    assert page.inner_text("#count") == f"{len(USERS) * DIMS} of {len(USERS) * DIMS} cases"


def fill_sheet(page, sample: dict) -> list[tuple[str, str, str]]:
    """Mark every item but the last: agree, except the first of each label type (disagree)."""
    expected = []
    first = set()
    for i, item in enumerate(sample["items"][:-1]):
        box = page.locator(f".audit-item >> nth={i}")
        if item["label_type"] in first:
            box.locator(".verdict-agree").check()
            expected.append((item["label_type"], item["llm_label"], item["llm_label"]))
            continue
        first.add(item["label_type"])
        other = next(
            lab for lab in sample["labels"][item["label_type"]] if lab != item["llm_label"]
        )
        box.locator(".verdict-disagree").check()
        box.locator(".human-label").select_option(other)
        expected.append((item["label_type"], item["llm_label"], other))
    return expected


@needs_browser
def test_audit_sheet_round_trip_to_agreement(release_wf, page, tmp_path):
    results = release_wf.results
    # The run's folder from its config (docs/runs.md), the workflow named from elsewhere.
    subprocess.run(
        [MEMPROBE, "audit", "sample", "--n", "6", "--seed", "3", "--name", "pilot",
         "--directory", str(release_wf.root), "--configfile", str(release_wf.config_path)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    folder = results / "audit" / "pilot"
    sample = json.loads((folder / "items.json").read_text())
    assert {it["label_type"] for it in sample["items"]} == {"feedback", "attribution"}
    assert len(sample["items"]) == 12
    open_page(page, folder / "index.html")
    expected = fill_sheet(page, sample)
    assert page.inner_text("#progress") == "11 of 12 marked"
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(tmp_path / "audit.png"))
    page.reload()  # marks survive a reload
    page.wait_for_selector("body[data-ready='1']", state="attached")
    assert page.inner_text("#progress") == "11 of 12 marked"
    with page.expect_download() as dl:
        page.click("#save")
    assert dl.value.suggested_filename == "sheet.csv"
    dl.value.save_as(folder / "sheet.csv")

    rows = list(csv.DictReader(open(folder / "sheet.csv", newline="")))
    assert [r["item_id"] for r in rows] == [it["id"] for it in sample["items"]]
    assert rows[-1]["verdict"] == "" and rows[-1]["human_label"] == ""
    got = [(r["label_type"], r["llm_label"], r["human_label"]) for r in rows[:-1]]
    assert got == expected

    release_wf.run("audit_agreement")
    table = {r["label_type"]: r for r in csv.DictReader(open(results / "audit/agreement.csv"))}
    for label_type in ("feedback", "attribution"):
        pairs = [(llm, human) for t, llm, human in expected if t == label_type]
        row = table[label_type]
        assert int(row["n"]) == len(pairs)
        assert float(row["raw_agreement"]) == pytest.approx(
            sum(a == b for a, b in pairs) / len(pairs), abs=1e-4
        )
        assert float(row["kappa"]) == pytest.approx(audit.cohen_kappa(pairs), abs=1e-4)
        assert row["kappa_ci_low"] != "" and row["kappa_ci_high"] != ""
        assert float(row["kappa_ci_low"]) <= float(row["kappa"]) <= float(row["kappa_ci_high"])

    # A sheet naming an item that is not in its sample: one line, and no agreement.csv.
    bad = folder / "sheet-bad.csv"
    bad.write_text(
        "item_id,label_type,llm_label,verdict,human_label\nfeedback:x,feedback,a,agree,\n"
    )
    proc = release_wf.run("audit_agreement", check=False)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "memprobe: audit_agreement:" in ln]
    assert len(lines) == 1 and "sheet-bad.csv: line 2: unknown item id 'feedback:x'" in lines[0]
    assert not (results / "audit/agreement.csv").exists()

    # The same name twice would overwrite a sample (and its sheets): refused.
    again = subprocess.run(
        [MEMPROBE, "audit", "sample", "--n", "2", "--name", "pilot", "--results", str(results)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert again.returncode == 1 and "already exists" in again.stderr
    assert (folder / "sheet.csv").exists()


@pytest.mark.workflow
def test_tiny_run_builds_the_inspector_and_the_report_links_it(endpoint, workflow_factory):
    wf = workflow_factory(tiny_config(endpoint.base_url))
    wf.run()  # the default target
    site = wf.results / "inspect"
    assert (site / "index.html").exists()
    assert len(list((site / "cases").glob("*.html"))) == 2 * 5  # 2 users x 5 dims
    wf.run("--report", wf.target("report.html"))
    report = (wf.results / "report.html").read_text()
    assert "inspect/index.html" in report
