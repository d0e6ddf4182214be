// Shared by the inspector's pages. Every string comes from a model or a file: it is only ever
// set through textContent, never parsed as HTML.
"use strict";
function pageData() {
  return JSON.parse(document.getElementById("data").textContent);
}
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}
function scoreClass(score) {
  if (score === null || score === undefined) return "";
  return "s" + Math.round(score * 100);
}
function fmt(score) {
  return score === null || score === undefined ? "–" : score.toFixed(2);
}
