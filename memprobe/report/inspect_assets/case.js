// One case: the target, its task, and per system the episode and each mode's scoring chain.
"use strict";
const C = pageData();
const WORDS = new Set(C.words);

// The same crude stem as memprobe/protocol/users.py content_words, so highlights match the selection.
function stem(w) {
  w = w.replace(/^['-]+|['-]+$/g, "");
  for (const suf of ["ing", "ed", "es", "s"]) {
    if (w.endsWith(suf) && w.length - suf.length >= 4) return w.slice(0, -suf.length);
  }
  return w;
}
function highlighted(text) {
  const out = el("div", { class: "text" });
  let last = 0;
  for (const m of text.matchAll(/[A-Za-z][A-Za-z'-]+/g)) {
    if (!WORDS.has(stem(m[0].toLowerCase()))) continue;
    out.append(text.slice(last, m.index), el("mark", { text: m[0] }));
    last = m.index + m[0].length;
  }
  out.append(text.slice(last));
  return out;
}
const field = (name, value) =>
  el("div", {}, el("span", { class: "who", text: name + ": " }), el("span", { class: "text", text: String(value ?? "–") }));

function taskBox(t) {
  if (!t) return el("div", { class: "box" }, el("h2", { text: "Task" }), el("p", { class: "muted", text: "no task targets this dimension" }));
  const box = el("div", { class: "box", id: "task" }, el("h2", { text: "Task " + t.index + " (" + t.status + ")" }),
    el("div", { class: "text", text: t.task }));
  if (t.rationale) box.append(field("rationale", t.rationale));
  if (t.verdicts.length) {
    box.append(el("h3", { text: "Critic's verdicts" }));
    t.verdicts.forEach((v, i) => box.append(field("round " + (i + 1), v.verdict + " — inferred: " + v.inferred_trait + (v.why ? " (" + v.why + ")" : ""))));
  }
  if (t.revisions.length) {
    box.append(el("h3", { text: "Editor's revisions" }));
    t.revisions.forEach((r, i) => box.append(field("revision " + (i + 1), r)));
  }
  if (t.leak_share) box.append(field("leak share", t.leak_share + (t.leak_flag ? " (flagged)" : "")));
  return box;
}
function transcript(ep) {
  const box = el("div", { class: "transcript" });
  if (!ep) return el("p", { class: "muted", text: "no episode for this dimension" });
  box.append(el("div", { class: "muted", text: "episode " + ep.index + ", ended: " + ep.end_reason + ", " + ep.turns.length + " turns" }));
  for (const t of ep.turns) {
    const turn = el("div", { class: "turn" });
    if (t.recalled && t.recalled.length) {
      const rec = el("div", { class: "recalled" }, el("span", { class: "who", text: "memory recalled:" }));
      t.recalled.forEach((line) => rec.append(el("div", { class: "text", text: line })));
      turn.append(rec);
    }
    turn.append(el("div", { class: "who", text: "Assistant (turn " + t.turn + ")" }),
      el("div", { class: "text", text: t.agent_response }),
      el("div", { class: "who" }, "User", el("span", { class: "fb", text: t.feedback_type })),
      el("div", { class: "text", text: t.user_text }));
    box.append(turn);
  }
  return box;
}
function memory(mem) {
  const box = el("div", { class: "memory" });
  if (mem.kind === "dump_all") {
    box.append(el("div", { class: "muted", text: mem.matching + " of " + mem.total +
      " stored items mention the target's words; " + mem.items.length + " shown" }));
    for (const it of mem.items) box.append(el("div", { class: "item" }, el("span", { class: "muted", text: "#" + it.n }), highlighted(it.content)));
  } else {
    box.append(field("query", mem.query));
    for (const it of mem.items) box.append(el("div", { class: "item" },
      el("span", { class: "muted", text: "score " + (typeof it.score === "number" ? it.score.toFixed(3) : "–") }), highlighted(it.content)));
  }
  return box;
}
function modeBox(m) {
  const box = el("div", { class: "box mode", "data-mode": m.mode }, el("h3", { text: m.mode }));
  if (m.overflow) box.append(el("div", { class: "flag", text: "store overflowed the slot-filler's context: not scored (†)" }));
  box.append(el("h3", { text: "What the slot-filler saw" }), memory(m.memory));
  if (m.slotfill) box.append(el("h3", { text: "Slot-fill" }), field("label", m.slotfill.label), field("reason", m.slotfill.reason));
  if (m.judge) box.append(el("h3", { text: "Judge" }),
    el("div", { class: "score " + scoreClass(m.judge.score), text: "score " + fmt(m.judge.score) }),
    el("div", { class: "judge-reason" }, field("reason", m.judge.reason)));
  if (m.attribution) {
    box.append(el("h3", { text: "Attribution" }), field("label", m.attribution.label));
    for (const st of m.attribution.stages) {
      const rest = Object.entries(st).filter(([k]) => k !== "stage").map(([k, v]) => k + ": " + (typeof v === "string" ? v : JSON.stringify(v)));
      box.append(field(st.stage, rest.join("; ")));
    }
  }
  return box;
}
// compare.runs: this run's label and score for the target next to each compared run's.
function comparedBox(c) {
  if (!c) return null;
  const head = el("tr", {}, el("th", { text: "run" }), el("th", { text: "system" }));
  c.modes.forEach((m) => head.append(el("th", { text: m })));
  const body = el("tbody");
  for (const r of c.rows) {
    const tr = el("tr", { class: r.this ? "this-run" : "", "data-run": r.run, "data-system": r.system },
      el("td", { text: r.run + (r.this ? " (this run)" : "") }), el("td", { text: r.system }));
    for (const m of c.modes) {
      const cell = r.cells[m];
      tr.append(cell
        ? el("td", { "data-mode": m }, el("span", { class: "score " + scoreClass(cell.score), text: fmt(cell.score) }),
          " ", el("span", { class: "text", text: cell.label }))
        : el("td", { class: "muted", "data-mode": m, text: "–" }));
    }
    body.append(tr);
  }
  return el("div", { class: "box", id: "compared" }, el("h2", { text: "Runs side by side (label, score)" }),
    el("table", {}, el("thead", {}, head), body));
}
function main() {
  const t = C.target;
  const grid = el("div", { class: "grid" });
  for (const s of C.systems) {
    const col = el("div", { class: "box system", "data-system": s.system }, el("h2", { text: s.system }));
    col.append(el("h3", { text: "Episode" }), transcript(s.episode));
    s.modes.forEach((m) => col.append(modeBox(m)));
    grid.append(col);
  }
  const parts = [
    el("p", {}, el("a", { href: "../index.html", text: "← all cases" })),
    el("h1", { text: C.user + " · " + t.dimension }),
    el("div", { class: "box", id: "target" }, el("h2", { text: "Target (" + t.category + ")" }),
      field("short", t.short), field("explanation", t.explanation)),
    taskBox(C.task), comparedBox(C.compared), grid];
  document.getElementById("app").replaceChildren(...parts.filter((p) => p));
  document.body.dataset.ready = "1";
}
main();
