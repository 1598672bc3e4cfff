// memplan web page, the form: made from the catalog the server inlines (api/webform.py: every request field's label
// and help from its description in the declaration, its control, its default), so it is whole when the page loads
// and a knob added to the core's request model appears here with no page code.
"use strict";
const CATALOG = JSON.parse(document.getElementById("form-catalog").textContent);
const FIELDS = new Map();       // "workload.kind" -> its catalog entry
let SEARCHED = {};              // searched field -> true where its values are integers (zero)
// The workload's inputs each belong to some kinds (planner/config/workload.py's rules): shown, and sent, only while
// one of those kinds is selected; the roles are verl's and OpenRLHF's (ppo, rloo, reinforce++, and their grpo).
const RL = "grpo ppo rloo reinforce++";
const ONLY_FOR = {num_generations: RL, max_completion_length: RL, beta: RL, steps_per_generation: RL,
  num_iterations: RL, generation: "grpo", vllm_gpu_memory_utilization: "grpo", max_prompt_length: "dpo " + RL,
  logprobs: "grpo dpo", max_length: "dpo", precompute_ref_log_probs: "dpo", roles: RL};

function index(fields) {
  for (const f of fields) { FIELDS.set(f.name, f); if (f.fields) index(f.fields); }
}

function labelFor(name, label, help) {
  const l = el("label", {for: name}, label);
  if (help) l.title = help;
  return help ? [l, el("small", {class: "help"}, help)] : [l];
}

function buildForm() {
  index(CATALOG.fields);
  for (const m of CATALOG.models) $("#model").append(el("option", {value: m.name}, `${m.name} (${(m.params / 1e9).toFixed(2)}B)`));
  for (const g of CATALOG.gpus) $("#gpu").append(el("option", {value: g.name}, `${g.name} (${gib(g.capacity_bytes)} GiB)`));
  $("#model").value = "llama-3.1-8b";
  $("#gpu").value = "h100-80gb";
  for (const l of document.querySelectorAll("#plan-form label[for]")) {     // the laid-out fields' labels too
    const f = FIELDS.get(l.htmlFor);
    if (f) { l.textContent = f.label; if (f.help) l.title = f.help; }
  }
  for (const f of CATALOG.fields) if (f.kind === "checks") searchedRow(f);
  const laid = new Set([...document.querySelectorAll("#plan-form [name], #plan-form [data-field]")].map((e) => e.name || e.dataset.field));
  for (const f of CATALOG.fields) if (!laid.has(f.name)) (f.kind === "group" ? group($("#more"), f) : addControl($("#more"), f));
}

// A searched knob: one checkbox per value, ticked where the request's default list has it.
function searchedRow(f) {
  SEARCHED[f.name] = f.choices.every((v) => typeof v === "number");
  let box = document.getElementById(f.name);
  if (!box) {
    box = el("div", {class: "checks", id: f.name, "data-field": f.name});
    $("#allowed").append(box, el("p", {class: "error", id: "err-" + f.name, role: "alert"}));
  }
  box.append(el("span", {class: "legend", title: f.help}, f.label));
  for (const v of f.choices) {
    const check = el("input", {type: "checkbox", name: f.name, value: String(v)});
    check.checked = (f.default || []).includes(v);
    const label = el("label");
    label.append(check, String(v));
    box.append(label);
  }
}

// A nested model (the workload, its roles): its own fields, sent as one object under its name.
function group(parent, f) {
  const box = el("fieldset", {class: "nested", "data-field": f.name});
  box.append(el("legend", {title: f.help}, f.label));
  for (const inner of f.fields) {
    const cell = inner.kind === "group" ? group(box, inner) : addControl(box, inner);
    const only = ONLY_FOR[inner.name.split(".").pop()];
    if (only) cell.dataset.only = only;
  }
  box.append(el("p", {class: "error", id: "err-" + f.name, role: "alert"}));
  parent.append(box);
  const kind = document.getElementById(`${f.name}.kind`);
  if (kind) { kind.addEventListener("change", () => showKind(box, kind.value)); showKind(box, kind.value); }
  return box;
}

function showKind(box, kind) {
  for (const cell of box.querySelectorAll("[data-only]")) cell.hidden = !cell.dataset.only.split(" ").includes(kind);
}

function addControl(parent, f) {
  let control;
  const name = f.name, shown = f.default === null || f.default === undefined ? "" : String(f.default);
  if (f.kind === "enum" || (f.kind === "boolean" && f.nullable)) {
    control = el("select", {id: name, name});
    const values = f.kind === "enum" ? f.choices : [true, false];
    if (f.nullable) control.append(el("option", {value: ""}, "(default)"));
    for (const v of values) control.append(el("option", {value: String(v)}, String(v)));
    control.value = shown;
  } else if (f.kind === "boolean") {
    control = el("input", {id: name, name, type: "checkbox"});
    control.checked = f.default === true;
  } else if (f.kind === "string" || f.kind === "list") {
    control = el("input", {id: name, name, type: "text", placeholder: f.kind === "list" ? "comma-separated" : shown});
  } else {
    control = el("input", {id: name, name, type: "number", step: f.kind === "integer" ? "1" : "any", placeholder: shown});
  }
  control.dataset.kind = f.kind;
  if (f.kind === "enum") control.dataset.numeric = String(f.choices.every((v) => typeof v === "number"));
  const cell = el("div", {class: "field"});
  cell.append(...labelFor(name, f.label, f.help), control, el("p", {class: "error", id: "err-" + name, role: "alert"}));
  parent.append(cell);
  return cell;
}

function controlValue(c) {
  const k = c.dataset.kind;
  if (k === "boolean") return c.tagName === "SELECT" ? (c.value === "" ? undefined : c.value === "true") : (c.checked ? true : undefined);
  if (c.value === "") return undefined;
  if (k === "enum") return c.dataset.numeric === "true" ? Number(c.value) : c.value;
  if (k === "list") return c.value.split(",").map((x) => x.trim()).filter((x) => x);
  return k === "string" ? c.value : Number(c.value);
}

function moreValues() {
  const out = {};
  for (const c of document.querySelectorAll("#more [name]")) {
    if (c.closest("[hidden]")) continue;      // another workload's field
    const v = controlValue(c);
    if (v === undefined) continue;
    const path = c.name.split(".");      // "workload.roles.placement" goes to out.workload.roles.placement
    let at = out;
    for (const key of path.slice(0, -1)) at = at[key] = at[key] || {};
    at[path[path.length - 1]] = v;
  }
  return out;
}
