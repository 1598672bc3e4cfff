// memplan web page, your own configuration: files chosen or text pasted, read and checked by the server
// (POST /v1/check/config, the CLI's `planner check --config`): what was read, field by field and from where, and
// whether the run fits.
"use strict";
const MAX_FILES = 8;      // api/schemas.py ConfigCheckRequest

async function configFiles() {
  const out = {};
  for (const f of [...$("#cfg-files").files].slice(0, MAX_FILES)) out[f.name] = await f.text();
  const pasted = $("#cfg-text").value;
  if (pasted.trim()) out[$("#cfg-name").value.trim() || "pasted.sh"] = pasted;
  return out;
}

async function checkConfig(ev) {
  ev.preventDefault();
  for (const e of document.querySelectorAll("#config-form .error")) e.textContent = "";
  $("#cfg-answer").hidden = true;
  const files = await configFiles();
  if (!Object.keys(files).length) { $("#err-cfg").textContent = "choose a file or paste one"; return; }
  $("#cfg-check").disabled = true;
  try {
    const r = await api("/v1/check/config", {files, gpu: $("#cfg-gpu").value});
    if (!r.ok) {
      const details = Array.isArray(r.data.detail) ? r.data.detail : [{msg: `${r.status}: ${r.data.detail}`}];
      $("#err-cfg").textContent = details.map((d) => d.msg).join(" ");
      return;
    }
    showCheck(r.data);
  } finally { $("#cfg-check").disabled = false; }
}

function showCheck(out) {
  const p = out.plan, c = out.config;
  $("#cfg-answer").hidden = false;
  $("#cfg-title").textContent = `${c.framework}: ${out.model.name} on ${out.hardware.world_size} x ${out.hardware.gpu}, ` +
    `micro ${p.micro_batch} x accum ${p.grad_accum}, ${p.precision}, checkpointing ${p.checkpointing}, ${sharding(p)}: ` +
    `${gib(p.memory.device_total_bytes)} of ${gib(out.hardware.capacity_bytes)} GiB, ` + (p.fits ? "fits" : `does not fit (${p.reason})`);
  $("#cfg-settings tbody").replaceChildren(...c.settings.map((s) => row([s.field, JSON.stringify(s.value), s.source, s.key])));
  $("#cfg-unplanned").replaceChildren(...c.unplanned.map((u) => el("li", {}, u)));
}

function uploadSetup() {
  for (const g of CATALOG.gpus) $("#cfg-gpu").append(el("option", {value: g.name}, g.name));
  $("#cfg-gpu").value = "h100-80gb";
  $("#config-form").addEventListener("submit", checkConfig);
}
