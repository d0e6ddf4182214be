// The audit sheet: mark each LLM label agree / disagree (with your own label), then save the
// sheet as CSV. Marks are kept in this browser (localStorage) until saved, so a reload loses
// nothing. Every string is set through textContent.
"use strict";
const S = pageData();
const KEY = "memprobe-audit:" + S.name + ":" + S.seed;
const marks = JSON.parse(localStorage.getItem(KEY) || "{}");

function keep() {
  localStorage.setItem(KEY, JSON.stringify(marks));
  const done = S.items.filter((it) => marks[it.id] && marks[it.id].verdict).length;
  const progress = document.getElementById("progress");
  if (progress) progress.textContent = done + " of " + S.items.length + " marked";
}
function csvCell(v) {
  v = String(v ?? "");
  // A text a spreadsheet would evaluate (= + - @ tab CR first) gets a leading ' (as
  // memprobe/spec/sheets.py does); the agreement step removes it when it reads the sheet back.
  if (/^[=+\-@\t\r]/.test(v) && !/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(v)) v = "'" + v;
  return /[",\n\r]/.test(v) ? '"' + v.replace(/"/g, '""') + '"' : v;
}
function sheetCsv() {
  const lines = [["item_id", "label_type", "llm_label", "verdict", "human_label"].join(",")];
  for (const it of S.items) {
    const m = marks[it.id] || {};
    const human = m.verdict === "agree" ? it.llm_label : (m.verdict === "disagree" ? m.human || "" : "");
    lines.push([it.id, it.label_type, it.llm_label, m.verdict || "", human].map(csvCell).join(","));
  }
  return lines.join("\n") + "\n";
}
function save() {
  const url = URL.createObjectURL(new Blob([sheetCsv()], { type: "text/csv" }));
  const a = el("a", { href: url, download: "sheet.csv" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
function itemBox(it, n) {
  const m = marks[it.id] || (marks[it.id] = {});
  const box = el("div", { class: "audit-item", "data-id": it.id });
  box.append(el("h3", { text: "#" + n + " · " + it.label_type + " · " + it.system + " · " + it.user + (it.category ? " · " + it.category : "") }));
  for (const [head, text] of it.context) {
    box.append(el("div", {}, el("span", { class: "who", text: head + ": " }), el("span", { class: "text", text })));
  }
  box.append(el("p", {}, "The model's label: ", el("strong", { class: "llm-label", text: it.llm_label })));
  const select = el("select", { class: "human-label" });
  select.append(el("option", { value: "", text: "(your label)" }));
  for (const l of S.labels[it.label_type]) select.append(el("option", { value: l, text: l }));
  select.value = m.human || "";
  const row = el("div", {});
  for (const v of ["agree", "disagree"]) {
    const radio = el("input", { type: "radio", name: "v-" + it.id, value: v, class: "verdict-" + v });
    radio.checked = m.verdict === v;
    radio.addEventListener("change", () => { m.verdict = v; update(); });
    row.append(el("label", {}, radio, " " + v + "  "));
  }
  row.append(select);
  select.addEventListener("change", () => { m.human = select.value; update(); });
  function update() {
    select.disabled = m.verdict !== "disagree";
    box.classList.toggle("done", Boolean(m.verdict === "agree" || (m.verdict === "disagree" && m.human)));
    keep();
  }
  update();
  box.append(row);
  return box;
}
function main() {
  const button = el("button", { id: "save", text: "Save sheet (CSV)" });
  button.addEventListener("click", save);
  const list = el("div", { id: "items" });
  S.items.forEach((it, i) => list.append(itemBox(it, i + 1)));
  document.getElementById("app").replaceChildren(
    el("h1", { text: "MemProbe audit: " + S.name }),
    el("p", { class: "muted", text: "For each item: agree with the model's label, or disagree and pick the label you would give. " +
      "Save the sheet into this sample's folder as sheet.csv (or sheet-<you>.csv); " +
      "`snakemake audit_agreement` then writes results/audit/agreement.csv." }),
    el("p", {}, button, " ", el("span", { id: "progress", class: "muted" })),
    list);
  keep();
  document.body.dataset.ready = "1";
}
main();
