// memplan web page: a form over the API's own endpoints, plain SVG charts, no external code.
"use strict";
const $ = (sel) => document.querySelector(sel);
const GIB = 2 ** 30;
const TERMS = [["params_bytes", "parameters", "#4e79a7"], ["grads_bytes", "gradients", "#f28e2b"],
  ["optimizer_bytes", "optimizer", "#e15759"], ["activations_bytes", "activations", "#76b7b2"],
  ["temp_bytes", "temporaries", "#59a14f"], ["overhead_bytes", "overhead", "#bab0ac"]];
let last = null;

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

let formReady;      // resolved once the schema's fields are laid out
const ready = new Promise((resolve) => { formReady = resolve; });

async function init() {
  // The handler comes first: a submit (Enter in a field) before the page has loaded must not fall through to the
  // browser's own GET submission; it runs once the form is complete.
  $("#plan-form").addEventListener("submit", (ev) => { ev.preventDefault(); ready.then(submit); });
  const [models, gpus] = await Promise.all([api("/v1/models"), api("/v1/gpus")]);
  for (const m of models.data.models) $("#model").append(el("option", {value: m.name}, `${m.name} (${(m.params / 1e9).toFixed(2)}B)`));
  for (const g of gpus.data.gpus) $("#gpu").append(el("option", {value: g.name}, `${g.name} (${gib(g.capacity_bytes)} GiB)`));
  $("#model").value = "llama-3.1-8b";
  $("#gpu").value = "h100-80gb";
  await searchedFields();
  await moreFields();
  formReady();
  for (const b of document.querySelectorAll("[data-copy]")) b.addEventListener("click", () => copy(b.dataset.copy, b));
}

// Every request field the form does not lay out itself gets a control made from the API's schema, so a knob
// added to the core's request model appears here with no page code (tests/api/test_web.py checks all are there).
const LABELS = {image_tokens: "Image tokens per sample (VLMs)", images: "or images per sample (alone: the worst case of the processor's settings)", tokens_per_image: "and tokens per image",
  lora_rank: "LoRA rank (0 = full fine-tuning)", margin: "Margin kept free (fraction; empty = default)",
  inter_node_gbps: "Network per node (Gb/s)", host_ram_gb: "Host RAM per node (GiB)", top: "Plans to show",
  image_rule: "Image tokens rule (with a dataset or images alone; empty = the model's)",
  min_pixels: "Processor min_pixels (Qwen-VL)", max_pixels: "Processor max_pixels (Qwen-VL)",
  max_length: "Cut rows to (tokens, with a dataset)",
  seed: "Trainer's sampler seed", max_tokens_per_micro_batch: "Token budget per micro-batch",
  optimizer_in_backward: "Optimizer in backward (accumulation 1, one GPU)", quant: "4-bit base (QLoRA, with a LoRA rank)",
  lora_targets: "LoRA targets (all-linear, attention, or names)", lora_train_embeddings: "Train embedding and head (LoRA)",
  lora_dropout: "LoRA dropout", "workload.kind": "Workload: sft, or TRL's dpo / grpo (global batch in pairs / completions)"};
let schema = {};
// The workload's fields each belong to some kinds (planner/config/workload.py: GRPOConfig's, DPOConfig's); shown, and sent,
// only while one of those kinds is selected.
const ONLY_FOR = {num_generations: "grpo", max_completion_length: "grpo", beta: "grpo", generation: "grpo",
  vllm_gpu_memory_utilization: "grpo", steps_per_generation: "grpo", num_iterations: "grpo",
  max_prompt_length: "grpo dpo", logprobs: "grpo dpo", max_length: "dpo", precompute_ref_log_probs: "dpo"};

// The knobs suggest searches (lists of enumerated values in the API's schema, from the core's one declaration):
// one checkbox per value, ticked where the request's default list has it. A new searched knob gets its row here.
let SEARCHED = {};      // field -> true where its values are integers (zero)
async function searchedFields() {
  const props = (await openapi()).components.schemas.SuggestRequest.properties;
  for (const [field, prop] of Object.entries(props)) {
    if (prop.type !== "array" || !prop.items || !prop.items.enum) continue;
    SEARCHED[field] = prop.items.type === "integer";
    let row = document.getElementById(field);
    if (!row) {
      row = el("div", {class: "checks", id: field, "data-field": field});
      $("#allowed").append(row, el("p", {class: "error", id: "err-" + field, role: "alert"}));
    }
    for (const v of prop.items.enum) {
      const box = el("input", {type: "checkbox", name: field, value: String(v)});
      box.checked = (prop.default || []).includes(v);
      const label = el("label");
      label.append(box, String(v));
      row.append(label);
    }
  }
}

let spec = null;
async function openapi() {
  spec = spec || (await api("/openapi.json")).data;
  return spec;
}

async function moreFields() {
  await openapi();
  schema = spec.components.schemas.SuggestRequest.properties;
  const laid = new Set([...document.querySelectorAll("#plan-form [name], #plan-form [data-field]")]
    .map((e) => e.name || e.dataset.field));
  for (const [name, prop] of Object.entries(schema)) {
    if (laid.has(name)) continue;
    const ref = prop.$ref || (prop.allOf && prop.allOf[0].$ref);
    if (ref) {     // a nested model (the workload): its own fields, sent as one object under `name`
      const sub = spec.components.schemas[ref.split("/").pop()].properties;
      const box = el("div", {class: "nested", "data-field": name});
      for (const [inner, p] of Object.entries(sub)) {
        const cell = addControl(box, `${name}.${inner}`, p, LABELS[`${name}.${inner}`] || `${name}: ${p.title || inner}`);
        if (ONLY_FOR[inner]) cell.dataset.only = ONLY_FOR[inner];
      }
      box.append(el("p", {class: "error", id: "err-" + name, role: "alert"}));
      $("#more").append(box);
      const kind = document.getElementById(`${name}.kind`);
      if (kind) { kind.addEventListener("change", () => showKind(box, kind.value)); showKind(box, kind.value); }
      continue;
    }
    addControl($("#more"), name, prop, LABELS[name] || prop.title || name);
  }
}

function showKind(box, kind) {
  for (const cell of box.querySelectorAll("[data-only]")) cell.hidden = !cell.dataset.only.split(" ").includes(kind);
}

function addControl(parent, name, prop, label) {
  const s = (prop.anyOf || [prop]).find((x) => x.type !== "null") || prop;
  let control;
  if (s.enum) {
    control = el("select", {id: name, name});
    for (const v of s.enum) control.append(el("option", {value: String(v)}, String(v)));
    if (prop.default !== undefined) control.value = String(prop.default);
  } else if (s.type === "boolean") {
    control = el("input", {id: name, name, type: "checkbox"});
  } else if (s.type === "string") {
    control = el("input", {id: name, name, type: "text", placeholder: prop.default == null ? "" : String(prop.default)});
  } else {
    control = el("input", {id: name, name, type: "number", step: s.type === "integer" ? "1" : "any",
      placeholder: prop.default === undefined || prop.default === null ? "" : String(prop.default)});
  }
  control.dataset.kind = s.enum ? "enum" : s.type;
  const cell = el("div", {class: "field"});
  cell.append(el("label", {for: name}, label), control, el("p", {class: "error", id: "err-" + name, role: "alert"}));
  parent.append(cell);
  return cell;
}

function moreValues() {
  const out = {};
  const put = (name, v) => {      // "workload.beta" goes to out.workload.beta
    const [outer, inner] = name.split(".");
    if (inner === undefined) out[outer] = v; else (out[outer] = out[outer] || {})[inner] = v;
  };
  for (const c of document.querySelectorAll("#more [name]")) {
    if (c.closest("[hidden]")) continue;      // another workload's field
    if (c.dataset.kind === "boolean") { if (c.checked) put(c.name, true); continue; }
    if (c.value === "") continue;
    put(c.name, c.dataset.kind === "enum" || c.dataset.kind === "string" ? c.value : Number(c.value));
  }
  return out;
}

function clearErrors() {
  for (const e of document.querySelectorAll(".error")) e.textContent = "";
  for (const e of document.querySelectorAll("[aria-invalid]")) e.removeAttribute("aria-invalid");
}

function showErrors(status, data) {
  $("#answer").hidden = true;           // an answer to another request must not stay on screen
  last = null;
  const details = Array.isArray(data.detail) ? data.detail : [{loc: [], msg: `${status}: ${data.detail}`}];
  for (const d of details) {
    let field = d.loc && d.loc[0] === "body" && d.loc[1] ? String(d.loc[1]) : "form";
    if (d.loc && d.loc[2] !== undefined && document.getElementById(`err-${field}.${d.loc[2]}`)) field = `${field}.${d.loc[2]}`;
    else if (!document.getElementById("err-" + field) && document.getElementById("err-workload." + field)) field = "workload." + field;
    const slot = document.getElementById("err-" + field) || $("#err-form");
    slot.textContent = (slot.textContent ? slot.textContent + " " : "") + d.msg;
    const input = document.getElementById(field);
    if (input) input.setAttribute("aria-invalid", "true");
  }
}

function body() {
  const checked = (f) => [...document.querySelectorAll(`input[name=${f}]:checked`)].map((b) => (SEARCHED[f] ? Number(b.value) : b.value));
  const searched = Object.fromEntries(Object.keys(SEARCHED).map((f) => [f, checked(f)]));
  const num = (id) => ($("#" + id).value === "" ? null : Number($("#" + id).value));
  const pasted = $("#config").value.trim();
  const text = (id) => $("#" + id).value.trim() || null;
  const data = text("data");      // a dataset names the sequence length: seq_len is not sent with it
  const more = moreValues();      // nor with DPO / GRPO, whose rows are as long as their TRL inputs say
  const rl = more.workload && more.workload.kind !== "sft";
  return {model: pasted ? JSON.parse(pasted) : $("#model").value, gpu: $("#gpu").value, gpus_per_node: num("gpus_per_node"),
    nodes: num("nodes"), global_batch: num("global_batch"), seq_len: data || rl ? null : num("seq_len"), data,
    tokenizer: text("tokenizer"), ...searched, ...more};
}

async function submit() {
  clearErrors();
  let b;
  try { b = body(); } catch (e) { showErrors(422, {detail: [{loc: ["body", "model"], msg: `config.json: ${e.message}`}]}); return; }
  $("#submit").disabled = true;
  try {
    const r = await api("/v1/plans", b);
    if (!r.ok) { showErrors(r.status, r.data); return; }
    last = {request: b, answer: r.data};
    await render(b, r.data);
  } finally { $("#submit").disabled = false; }
}

function row(cells) {
  const tr = el("tr");
  for (const c of cells) tr.append(el("td", {}, String(c)));
  return tr;
}

async function render(req, out) {
  $("#answer").hidden = false;
  const hw = out.hardware;
  $("#title").textContent = `${out.model.name} on ${hw.world_size} x ${hw.gpu}, global batch ${out.goal.global_batch} x ${out.goal.seq_len} tokens: ` +
    (out.plans.length ? `${out.plans.length} plans fit` : "nothing fits");
  const tbody = $("#plans tbody");
  tbody.replaceChildren(...out.plans.map((p, i) => row([i + 1, p.micro_batch, p.grad_accum, p.precision, p.checkpointing, sharding(p),
    p.offload, recipe(p), gib(p.memory.device_total_bytes), gib(p.memory.headroom_bytes), Math.round(p.tokens_per_s), p.evidence])));
  $("#rejected tbody").replaceChildren(...out.rejected.map((p) => row([p.precision, p.checkpointing, sharding(p), p.offload,
    recipe(p), gib(p.memory.device_total_bytes), p.reason])));
  $("#data-answer").hidden = !out.data;
  if (out.data) {
    const d = out.data, best = out.plans[0];
    $("#data-summary").textContent = `${d.rows.toLocaleString()} rows, the longest ${d.longest_tokens.toLocaleString()} tokens ` +
      `(row ${d.longest_row.toLocaleString()}); planned for ${d.planned_seq_len.toLocaleString()}` +
      (d.truncated_rows ? ` (max_length cuts ${d.truncated_rows.toLocaleString()} rows)` : "") +
      (best ? `; best plan: micro ${best.micro_batch} x accum ${best.grad_accum}, checkpointing ${best.checkpointing}, ` +
        sharding(best) + (best.token_batches ? `, micro-batches of at most ${best.token_batches.max_tokens_per_micro_batch.toLocaleString()} tokens` : "")
        : "; nothing fits");
    $("#histogram").replaceChildren(histogram(d.histogram, d.planned_seq_len));
  }
  const capacity = hw.capacity_bytes, usable = capacity * (1 - out.goal.margin);
  $("#bars").replaceChildren(bars(out.plans, capacity, usable));
  const best = out.plans[0];
  $("#fits").hidden = !best;
  $("#nothing-fits").hidden = !!best;
  $("#command").textContent = best ? best.launch.command : "";
  $("#command-note").textContent = best && best.launch.note ? best.launch.note : "";
  for (const b of document.querySelectorAll("[data-copy]")) b.hidden = !best || best.launch[b.dataset.copy] == null;
  if (!best) nothingFits(out);
  const ref = best || out.rejected[0];
  if (ref) {
    $("#curve-title").textContent = `Memory against micro-batch: ${ref.precision}, checkpointing ${ref.checkpointing}, ${sharding(ref)}, offload ${ref.offload}`;
    $("#curve").replaceChildren(curve(await curvePoints(req, out, ref), capacity, usable));
  }
}

function axes(svg, w, h, pad, top) {
  svg.append(el("line", {x1: pad, y1: h - pad, x2: w - 10, y2: h - pad, stroke: "#57606a"}));
  svg.append(el("line", {x1: pad, y1: 10, x2: pad, y2: h - pad, stroke: "#57606a"}));
  for (let i = 0; i <= 4; i++) {
    const v = top * i / 4, y = h - pad - (h - pad - 10) * i / 4;
    svg.append(el("text", {x: pad - 6, y: y + 4, "text-anchor": "end", "font-size": 11}, gib(v)));
  }
  svg.append(el("text", {x: 12, y: h / 2, "font-size": 11, transform: `rotate(-90 12 ${h / 2})`, "text-anchor": "middle"}, "GiB per GPU"));
}

function hline(svg, y, w, pad, cls, color, label, left = false) {
  svg.append(el("line", {class: cls, x1: pad, x2: w - 10, y1: y, y2: y, stroke: color, "stroke-dasharray": "6 4", "stroke-width": 2}));
  svg.append(el("text", {x: left ? pad + 4 : w - 12, y: left ? y + 13 : y - 4, "text-anchor": left ? "start" : "end",
    "font-size": 11, fill: color}, label));
}

function bars(plans, capacity, usable) {
  const w = 900, h = 320, pad = 56;
  const svg = el("svg", {viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "memory per GPU by term for each plan"});
  const top = Math.max(capacity, ...plans.map((p) => p.memory.device_total_bytes)) * 1.05;
  const y = (b) => h - pad - (h - pad - 10) * b / top;
  axes(svg, w, h, pad, top);
  const band = (w - pad - 20) / Math.max(plans.length, 1);
  plans.forEach((p, i) => {
    const g = el("g", {class: "plan-bar"});
    let acc = 0;
    for (const [key, name, color] of TERMS) {
      const v = p.memory[key];
      const r = el("rect", {x: pad + 10 + i * band, width: Math.max(band * 0.7, 2), y: y(acc + v), height: Math.max(y(acc) - y(acc + v), 0), fill: color});
      r.append(el("title", {}, `plan ${i + 1} ${name}: ${gib(v)} GiB`));
      g.append(r);
      acc += v;
    }
    g.append(el("text", {x: pad + 10 + i * band + band * 0.35, y: h - pad + 14, "text-anchor": "middle", "font-size": 11}, `#${i + 1}`));
    svg.append(g);
  });
  hline(svg, y(capacity), w, pad, "capacity-line", "#b3261e", `capacity ${gib(capacity)} GiB`);
  hline(svg, y(usable), w, pad, "margin-line", "#9a6700", `capacity - margin ${gib(usable)} GiB`, true);
  TERMS.forEach(([, name, color], i) => {
    svg.append(el("rect", {x: pad + 10 + i * 120, y: h - 22, width: 12, height: 12, fill: color}));
    svg.append(el("text", {x: pad + 26 + i * 120, y: h - 12, "font-size": 11}, name));
  });
  return svg;
}

// Rows per token-count bin (the API's histogram), with the length the plan is made for as a vertical line.
function histogram(hist, cap) {
  const w = 900, h = 260, pad = 56, n = hist.counts.length;
  const svg = el("svg", {viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "rows per token count"});
  const lo = hist.edges[0], hi = hist.edges[n], top = Math.max(...hist.counts) * 1.1;
  const x = (t) => pad + (w - pad - 20) * (t - lo) / Math.max(hi - lo, 1), y = (c) => h - pad - (h - pad - 10) * c / top;
  svg.append(el("line", {x1: pad, y1: h - pad, x2: w - 10, y2: h - pad, stroke: "#57606a"}));
  hist.counts.forEach((c, i) => {
    const r = el("rect", {class: "hist-bar", x: x(hist.edges[i]) + 1, width: Math.max(x(hist.edges[i + 1]) - x(hist.edges[i]) - 2, 1),
      y: y(c), height: h - pad - y(c), fill: "#4e79a7"});
    r.append(el("title", {}, `${hist.edges[i]}-${hist.edges[i + 1] - 1} tokens: ${c} rows`));
    svg.append(r);
  });
  for (const t of [lo, hi]) svg.append(el("text", {x: x(t), y: h - pad + 14, "text-anchor": "middle", "font-size": 11}, String(t)));
  svg.append(el("text", {x: w / 2, y: h - 22, "text-anchor": "middle", "font-size": 11}, "tokens per row (text + image)"));
  const cx = x(Math.min(cap + 0.5, hi));
  svg.append(el("line", {class: "cap-line", x1: cx, x2: cx, y1: 10, y2: h - pad, stroke: "#b3261e", "stroke-dasharray": "6 4", "stroke-width": 2}));
  svg.append(el("text", {x: cx - 4, y: 22, "text-anchor": "end", "font-size": 11, fill: "#b3261e"}, `planned for ${cap} tokens`));
  return svg;
}

// Nothing fits: the reasons, then the nearest requests that do fit, as the API answered them (`nearest`: one change
// each, with its best plan).
function nothingFits(out) {
  $("#reasons").replaceChildren(...out.rejected.map((p) => el("li", {},
    `${p.precision}, checkpointing ${p.checkpointing}, ${sharding(p)}, offload ${p.offload}: ${p.reason}`)));
  const nearest = out.nearest || [];
  $("#nearest tbody").replaceChildren(...nearest.map(({change, plan: p}) => row([change, p.micro_batch, p.grad_accum,
    p.precision, p.checkpointing, sharding(p), p.offload, gib(p.memory.device_total_bytes), Math.round(p.tokens_per_s)])));
  $("#nearest-none").hidden = nearest.length > 0;
}

async function curvePoints(req, out, ref) {
  const perRank = out.goal.global_batch / out.hardware.world_size;
  const mbs = [];
  for (let d = 1; d <= perRank && mbs.length < 12; d++) if (perRank % d === 0) mbs.push(d);
  const base = {model: req.model, gpu: req.gpu, gpus_per_node: req.gpus_per_node, nodes: req.nodes, seq_len: out.goal.seq_len,
    precision: ref.precision, checkpointing: ref.checkpointing, zero: ref.zero_stage, offload: ref.offload, fsdp: ref.fsdp || "off",
    optimizer: ref.optimizer, lora_rank: ref.lora_rank, loss: ref.loss, attention: ref.attention, batching: ref.batching,
    optimizer_in_backward: ref.optimizer_in_backward, evidence: "analytic"};
  const answers = await Promise.all(mbs.map((mb) => api("/v1/check", {...base, micro_batch: mb, grad_accum: perRank / mb})));
  return answers.filter((a) => a.ok).map((a) => [a.data.plan.micro_batch, a.data.plan.memory.device_total_bytes]);
}

// The axis is the capacity's (with the fitting points): a micro-batch far over it would flatten the rest, so it is
// drawn clipped at the top, marked, with its size in its title.
const CURVE_TOP = 1.5;      // the axis ends at this many times the capacity at most

function curve(points, capacity, usable) {
  const w = 900, h = 300, pad = 56;
  const svg = el("svg", {viewBox: `0 0 ${w} ${h}`, role: "img", "aria-label": "predicted memory against micro-batch"});
  if (!points.length) return svg;
  const top = Math.min(Math.max(capacity, ...points.map((p) => p[1])) * 1.05, capacity * CURVE_TOP);
  const n = points.length, x = (i) => pad + 20 + (w - pad - 50) * (n === 1 ? 0.5 : i / (n - 1));
  const y = (b) => h - pad - (h - pad - 10) * Math.min(b, top) / top;
  axes(svg, w, h, pad, top);
  svg.append(el("polyline", {class: "memory-curve", fill: "none", stroke: "#0550ae", "stroke-width": 2,
    points: points.map((p, i) => `${x(i)},${y(p[1])}`).join(" ")}));
  points.forEach((p, i) => {
    const over = p[1] > usable, clipped = p[1] > top;
    const c = clipped ? el("polygon", {points: `${x(i) - 6},${y(top) + 8} ${x(i)},${y(top) - 2} ${x(i) + 6},${y(top) + 8}`,
      fill: "#b3261e", class: "over clipped"})
      : el("circle", {cx: x(i), cy: y(p[1]), r: 4, fill: over ? "#b3261e" : "#0550ae", class: over ? "over" : "under"});
    c.append(el("title", {}, `micro-batch ${p[0]}: ${gib(p[1])} GiB${clipped ? " (off the chart)" : ""}`));
    svg.append(c);
    svg.append(el("text", {x: x(i), y: h - pad + 14, "text-anchor": "middle", "font-size": 11}, String(p[0])));
  });
  svg.append(el("text", {x: w / 2, y: h - 26, "text-anchor": "middle", "font-size": 11}, "micro-batch per GPU"));
  hline(svg, y(capacity), w, pad, "capacity-line", "#b3261e", `capacity ${gib(capacity)} GiB`);
  hline(svg, y(usable), w, pad, "margin-line", "#9a6700", `capacity - margin ${gib(usable)} GiB`, true);
  return svg;
}

async function copy(what, button) {
  const best = last && last.answer.plans[0];
  if (!best) return;
  const text = what === "command" ? best.launch.command : JSON.stringify(best.launch[what], null, 1);
  try { await navigator.clipboard.writeText(text); button.textContent = "Copied"; }
  catch (e) { $("#command").textContent = text; button.textContent = "Shown below (clipboard unavailable)"; }
}

init();
