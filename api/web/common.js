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

// The server's API token (MEMPLAN_API_TOKEN), asked on a 401 and kept for this tab only (sessionStorage).
const TOKEN_KEY = "memplan-token";
let asking = null;      // the one question on screen: requests that met a 401 together wait for the same answer

function askToken() {
  asking = asking || new Promise((resolve) => {
    const input = el("input", {id: "token-input", type: "password", autocomplete: "off", required: ""});
    const form = el("form", {method: "dialog"});
    form.append(el("label", {for: "token-input"}, "This server asks for its API token (MEMPLAN_API_TOKEN)"), input,
      el("button", {id: "token-ok", value: "ok"}, "Use it"));
    const dialog = el("dialog", {id: "token-dialog"});
    dialog.append(form);
    document.body.append(dialog);
    dialog.addEventListener("close", () => {
      const token = dialog.returnValue === "ok" ? input.value.trim() : "";   // Escape: no token, the 401 stands
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      dialog.remove();
      asking = null;
      resolve(token);
    });
    dialog.showModal();
  });
  return asking;
}

// fetch with the token; on a 401 the token is asked for once (unless another request got it meanwhile), then sent again.
async function authFetch(path, init = {}) {
  const send = (token) => fetch(path, token ? {...init, headers: {...init.headers, Authorization: `Bearer ${token}`}} : init);
  const sent = sessionStorage.getItem(TOKEN_KEY);
  const r = await send(sent);
  if (r.status !== 401) return r;
  let token = sessionStorage.getItem(TOKEN_KEY);
  if (token === sent) {                 // the token this request carried (or none) is refused: ask
    sessionStorage.removeItem(TOKEN_KEY);
    token = await askToken();
  }
  return token ? send(token) : r;
}

async function api(path, body) {
  const r = await authFetch(path, body === undefined ? {} : {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body)});
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
