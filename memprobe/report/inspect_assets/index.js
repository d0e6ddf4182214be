// The index: one row per (user, dimension); filters hide rows and system-mode columns.
"use strict";
const D = pageData();
const PAIRS = D.pairs.map(([s, m], i) => ({ s, m, i }));
const state = { sortKey: "user", sortDir: 1 };

function options(id, label, values) {
  const sel = el("select", { id });
  sel.append(el("option", { value: "", text: "all" }));
  for (const v of values) sel.append(el("option", { value: v, text: v }));
  sel.addEventListener("change", render);
  return el("label", {}, label, sel);
}
function numberBox(id, label, value) {
  const box = el("input", { id, type: "number", min: "0", max: "1", step: "0.25", value });
  box.addEventListener("input", render);
  return el("label", {}, label, box);
}
const uniq = (xs) => [...new Set(xs)];
const val = (id) => document.getElementById(id).value;

function visiblePairs() {
  const s = val("f-system"), m = val("f-mode");
  return PAIRS.filter((p) => (!s || p.s === s) && (!m || p.m === m));
}
function rowMatches(row, pairs) {
  const cat = val("f-category"), label = val("f-label"), q = val("f-text").toLowerCase();
  const lo = parseFloat(val("f-min")), hi = parseFloat(val("f-max"));
  if (cat && row[1] !== cat) return false;
  if (q && !(row[0] + " " + row[2] + " " + row[3]).toLowerCase().includes(q)) return false;
  return pairs.some((p) => {
    const [score, li] = row[5][p.i];
    if (label && D.labels[li] !== label) return false;
    if (score === null) return isNaN(lo) && isNaN(hi);
    return !(score < lo) && !(score > hi);
  });
}
function sortValue(row) {
  const k = state.sortKey;
  if (k === "user") return row[0] + " " + String(row[4]);
  if (k === "category") return row[1];
  if (k === "dimension") return row[2];
  if (k === "short") return row[3].toLowerCase();
  const s = row[5][Number(k)][0];
  return s === null ? -1 : s;
}
function header(key, text, pairs) {
  const th = el("th", { "data-key": key, text });
  if (state.sortKey === key) th.className = state.sortDir > 0 ? "sorted-asc" : "sorted-desc";
  th.addEventListener("click", () => {
    state.sortDir = state.sortKey === key ? -state.sortDir : 1;
    state.sortKey = key;
    render();
  });
  return th;
}
function render() {
  const pairs = visiblePairs();
  const rows = D.rows.filter((r) => rowMatches(r, pairs));
  rows.sort((a, b) => {
    const x = sortValue(a), y = sortValue(b);
    return (x < y ? -1 : x > y ? 1 : 0) * state.sortDir;
  });
  const head = el("tr", {}, header("user", "user"), header("category", "category"),
    header("dimension", "dimension"), header("short", "target"));
  for (const p of pairs) head.append(header(String(p.i), p.s + " · " + p.m));
  const body = document.createDocumentFragment();
  for (const r of rows) {
    const tr = el("tr", {}, el("td", { text: r[0] }), el("td", { text: r[1] }),
      el("td", {}, el("a", { href: r[4], text: r[2] })), el("td", { text: r[3] }));
    for (const p of pairs) {
      const [score, li] = r[5][p.i];
      tr.append(el("td", { class: "score " + scoreClass(score) }, fmt(score),
        el("span", { class: "label", text: D.labels[li] })));
    }
    body.append(tr);
  }
  const table = el("table", { id: "cases" }, el("thead", {}, head), el("tbody", {}, body));
  document.getElementById("table").replaceChildren(table);
  document.getElementById("count").textContent = rows.length + " of " + D.rows.length + " cases";
}

function main() {
  const strip = el("div", { class: "strip", id: "summary" });
  for (const b of D.summary) {
    strip.append(el("div", { class: "b" }, b.system + " · " + b.mode + "  B = ",
      el("strong", { text: fmt(b.B) }),
      el("span", { class: "muted", text: "  (" + b.users + " users" +
        (b.flagged ? ", " + b.flagged + " overflow-flagged" : "") + ")" })));
  }
  const labels = D.labels.filter((l) => l);
  const controls = el("div", { class: "controls" },
    options("f-system", "system", uniq(PAIRS.map((p) => p.s))),
    options("f-mode", "mode", uniq(PAIRS.map((p) => p.m))),
    options("f-category", "category", uniq(D.rows.map((r) => r[1]))),
    options("f-label", "attribution label", labels),
    numberBox("f-min", "score ≥", ""), numberBox("f-max", "score ≤", ""),
    el("label", {}, "search", el("input", { id: "f-text", type: "search" })),
    el("span", { id: "count", class: "muted" }));
  controls.querySelector("#f-text").addEventListener("input", render);
  document.getElementById("app").replaceChildren(
    el("h1", { text: "MemProbe case inspector" }),
    el("p", { class: "muted", text: "B: mean over users of the overall recovery score. " +
      "Each cell: judge score and attribution label; click a dimension for its case." }),
    strip, controls, el("div", { id: "table" }));
  render();
  document.body.dataset.ready = "1";
}
main();
