// memplan web page: the form (form.js) over the API's own endpoints, the answer with its charts (charts.js) and a
// plan's files (files.js), and your own configuration checked (upload.js). No external code.
"use strict";
let last = null;

function init() {
  buildForm();
  filesSetup();
  uploadSetup();
  $("#plan-form").addEventListener("submit", (ev) => { ev.preventDefault(); submit(); });
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
    const path = d.loc && d.loc[0] === "body" ? d.loc.slice(1).map(String) : [];
    let field = "form";     // the longest path with a slot: workload.roles.placement, workload, ...
    for (let n = path.length; n > 0 && field === "form"; n--) if (document.getElementById("err-" + path.slice(0, n).join("."))) field = path.slice(0, n).join(".");
    if (field === "form" && path.length && document.getElementById("err-workload." + path[0])) field = "workload." + path[0];
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
  delete $("#answer").dataset.ready;
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

async function render(req, out) {
  $("#answer").hidden = false;
  delete $("#answer").dataset.ready;
  const hw = out.hardware;
  $("#title").textContent = `${out.model.name} on ${hw.world_size} x ${hw.gpu}, global batch ${out.goal.global_batch} x ${out.goal.seq_len} tokens: ` +
    (out.plans.length ? `${out.plans.length} plans fit` : "nothing fits");
  const tbody = $("#plans tbody");
  tbody.replaceChildren(...out.plans.map((p, i) => row([i + 1, p.micro_batch, p.grad_accum, p.precision, p.checkpointing, sharding(p),
    p.offload, recipe(p), gib(p.memory.device_total_bytes), gib(p.memory.headroom_bytes), Math.round(p.tokens_per_s), p.evidence,
    filesButton(req, i + 1, p)])));
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
  shown = null;
  if (!best) nothingFits(out);
  const ref = best || out.rejected[0];
  if (ref) $("#curve-title").textContent = `Memory against micro-batch: ${ref.precision}, checkpointing ${ref.checkpointing}, ${sharding(ref)}, offload ${ref.offload}`;
  await Promise.all([showLines(req), best ? showFiles(req, 1, best) : null,
    ref ? curvePoints(req, out, ref).then((points) => $("#curve").replaceChildren(curve(points, capacity, usable))) : null]);
  $("#answer").dataset.ready = "true";      // everything of this answer is on screen
}

function filesButton(req, rank, plan) {
  const b = el("button", {type: "button", class: "plan-files", "data-rank": rank, "aria-pressed": "false"}, "files");
  b.addEventListener("click", () => { showFiles(req, rank, plan); $("#files-title").scrollIntoView(); });
  return b;
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

init();
