// memplan web page, shared helpers: elements, the API, sizes. Loaded first; no external code.
"use strict";
const $ = (sel) => document.querySelector(sel);
const GIB = 2 ** 30;

function el(tag, attrs = {}, text = "") {
  const ns = ["svg", "g", "rect", "line", "text", "polyline", "polygon", "circle", "title"].includes(tag) ? "http://www.w3.org/2000/svg" : null;
  const e = ns ? document.createElementNS(ns, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== "") e.textContent = text;
  return e;
}
const gib = (b) => (b / GIB).toFixed(2);
const sharding = (p) => (p.fsdp && p.fsdp !== "off" ? `FSDP ${p.fsdp}` : p.zero_stage ? `ZeRO-${p.zero_stage}` : "DDP");
// the recipe knobs away from their defaults (as the CLI's "recipe" column)
const recipe = (p) => [p.loss !== "standard" ? `${p.loss} loss` : "", p.attention !== "sdpa" ? p.attention : "",
  p.batching === "packed" ? "packed" : "", p.optimizer_in_backward ? "optimizer in backward" : "",
  p.workload && p.workload.kind !== "sft" ? p.workload.kind.toUpperCase() : ""].filter((x) => x).join(", ") || "-";

async function api(path, body) {
  const r = await fetch(path, body === undefined ? {} : {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
  let data = null;
  try { data = await r.json(); } catch (e) { data = {detail: r.statusText}; }
  return {ok: r.ok, status: r.status, data};
}

function row(cells) {
  const tr = el("tr");
  for (const c of cells) tr.append(c instanceof Node ? el("td").appendChild(c).parentNode : el("td", {}, String(c)));
  return tr;
}

// Text to the clipboard, or shown in `fallback` where the browser gives no clipboard (plain http off localhost).
async function copyText(text, button, fallback) {
  try { await navigator.clipboard.writeText(text); button.textContent = "Copied"; }
  catch (e) { fallback.textContent = text; fallback.hidden = false; button.textContent = "Shown (no clipboard here)"; }
}
