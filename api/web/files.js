// memplan web page, one plan's material: the lines the CLI prints beside its table (workload, images, videos), the
// phase that decides its memory, and every file of its launch (view, copy, download as a zip with the command).
"use strict";
let shown = null;       // {request, rank, files: the API's answer} of the plan whose files are on screen

async function showLines(request) {
  const r = await api("/v1/plans/lines", request);
  const lines = r.ok ? [`workload: ${r.data.workload}`, ...r.data.images, ...r.data.videos] : [];
  $("#lines").replaceChildren(...lines.map((l) => el("li", {}, l)));
  $("#lines").hidden = !lines.length;
}

// The phases of the plan's step with the one that decides its memory (the CLI's breakdown: "peak during ...").
function showPhases(plan) {
  const m = plan.memory;
  const phases = Object.entries(m.phases || {});
  const peakOf = (name) => name === m.peak_phase || name.endsWith(": " + m.peak_phase);
  $("#phase-title").textContent = `Plan #${shown.rank}: memory per GPU by phase, peak during ${m.peak_phase}` +
    (m.peak_term ? ` (largest term: ${m.peak_term})` : "");
  $("#phases tbody").replaceChildren(...phases.map(([name, bytes]) => {
    const tr = row([name + (peakOf(name) ? " (peak: decides)" : ""), gib(bytes)]);
    if (peakOf(name)) tr.classList.add("peak");
    return tr;
  }));
  $("#phases").hidden = !phases.length;
}

async function showFiles(request, rank, plan) {
  shown = {request, rank, files: null};
  for (const b of document.querySelectorAll("#plans [data-rank]")) b.setAttribute("aria-pressed", String(Number(b.dataset.rank) === rank));
  $("#files-title").textContent = `Plan #${rank}: files and command`;
  $("#command").textContent = plan.launch.command;
  $("#command-note").textContent = plan.launch.note || "";
  $("#files-list").replaceChildren();
  $("#err-files").textContent = "";
  showPhases(plan);
  const r = await api("/v1/plans/files", {request, rank});
  if (!shown || shown.rank !== rank || shown.request !== request) return;       // another plan was asked meanwhile
  if (!r.ok) { $("#err-files").textContent = r.data.detail[0] ? r.data.detail[0].msg : String(r.data.detail); return; }
  shown.files = r.data;
  $("#files-list").replaceChildren(...Object.entries(r.data.files).map(([name, text]) => fileItem(name, text)));
}

function fileItem(name, text) {
  const item = el("details", {class: "file", "data-file": name});
  const summary = el("summary", {}, name + " ");
  const copy = el("button", {type: "button", class: "copy-file"}, "Copy");
  const view = el("pre", {}, text);
  copy.addEventListener("click", (ev) => { ev.preventDefault(); item.open = true; copyText(text, copy, view); });
  summary.append(copy);
  item.append(summary, view);
  return item;
}

// The plan's files and its command as one zip, made by the server (POST /v1/plans/zip), saved by the browser.
async function downloadZip() {
  if (!shown) return;
  const r = await authFetch("/v1/plans/zip", {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({request: shown.request, rank: shown.rank})});
  if (!r.ok) { $("#err-files").textContent = `${r.status}: the zip could not be made`; return; }
  const name = (r.headers.get("Content-Disposition") || "").match(/filename="([^"]+)"/);
  const a = el("a", {href: URL.createObjectURL(await r.blob()), download: name ? name[1] : "memplan-plan.zip"});
  document.body.append(a);
  a.click();
  a.remove();
}

function filesSetup() {
  $("#zip").addEventListener("click", downloadZip);
  $("#copy-command").addEventListener("click", () => copyText($("#command").textContent, $("#copy-command"), $("#command")));
}
