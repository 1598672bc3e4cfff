"""torchtune 0.6.1's model builder (`model._component_: torchtune.models.llama3_1.lora_llama3_1_8b`) into the catalog
model and the adapter: `lora_*` builders take lora_attn_modules, apply_lora_to_mlp, apply_lora_to_output, lora_rank
(default 8), lora_dropout (0.0) (torchtune/models/llama3_1/_model_builders.py:84-92, alike in every family); `qlora_*`
is the same builder with quantize_base=True (llama3_2/_model_builders.py:188-194): every decoder linear a torchao NF4
tensor (FrozenNF4Linear where no adapter is; models/llama3/_component_builders.py:361-415,129-146), the output head
left in dtype (:265), as QLoRA's nf4 base is planned."""

from __future__ import annotations

import re
from pathlib import Path

from planner.intake import models
from planner.intake.collect import Collector, as_bool, as_float, default, show
from planner.intake.flags import Flag

TT = "torchtune 0.6.1"
B = "torchtune/models/llama3_1/_model_builders.py"
# builder (prefix lora_/qlora_ removed) -> catalog name
FAMILIES = (
    (r"llama3_(\d)_(\d+b)", lambda m: f"llama-3.{m[1]}-{m[2]}"),
    (r"llama3_2_vision_(\d+b)", lambda m: f"llama-3.2-{m[1]}-vision"),
    (r"llama2_(\d+b)", lambda m: f"llama-2-{m[1]}"),
    (r"qwen2_5_(\d+(?:_\d)?b)(?:_base|_instruct)?", lambda m: f"qwen2.5-{m[1].replace('_', '.')}"),
    (r"qwen3_(\d+(?:_\d)?b)(?:_base|_instruct)?", lambda m: f"qwen3-{m[1].replace('_', '.')}"),
    (r"gemma2_(\d+b)", lambda m: f"gemma-2-{m[1]}"),
    (r"mistral_7b", lambda m: "mistral-7b"),
    (r"phi3_mini", lambda m: "phi-3-mini"),
    (r"phi4_14b", lambda m: "phi-4"),
)
# torchtune's module names -> the checkpoint's (Hugging Face's, as memplan names LoRA targets); Phi's fused
FUSED = ("phi-3-mini", "phi-4")
ATTN = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
MLP = ("gate_proj", "down_proj", "up_proj")  # w1, w2, w3 (modules/feed_forward.py)


def catalog_name(builder: str) -> str | None:
    base = re.sub(r"^q?lora_", "", builder)
    for pattern, name in FAMILIES:
        m = re.fullmatch(pattern, base)
        if m:
            return name(m)
    return None


def read_model(c: Collector, f: dict[str, Flag], path: Path, recipe: str) -> None:
    comp = f.get("model._component_")
    if comp is None:
        c.note(f"{path.name}: no model._component_ (torchtune requires one): the model is not read; give --model")
        return
    builder = show(comp.value).rsplit(".", 1)[-1]
    name = catalog_name(builder)
    if name is None or models.lookup(name) is None:
        c.note(f"{comp.source} (a torchtune model builder memplan does not map to a model: give --model)")
    else:
        models.read_model(c, name, f"{comp.source} (torchtune's builder of {name})", "model._component_", None)
    lora = builder.startswith(("lora_", "qlora_"))
    if lora != recipe.startswith("lora"):
        c.note(f"{comp.source} (a {'LoRA' if lora else 'full'} builder under {recipe}: planned as the builder says)")
    if not lora:
        c.set("lora_rank", 0, f"{comp.source} (full fine-tuning)", "model._component_")
        return
    _lora(c, f, name or "")
    q = f.get("model.quantize_base")
    if builder.startswith("qlora_") or (q is not None and as_bool(q.value)):
        src = comp.source if builder.startswith("qlora_") else q.source
        c.set("quant", "nf4", f"{src} (torchao NF4 base: modules/low_precision/nf4_linear.py:48)", "model._component_")


def _lora(c: Collector, f: dict[str, Flag], name: str) -> None:
    r = f.get("model.lora_rank")
    if r is not None:
        c.number("lora_rank", r.value, r.source, "model.lora_rank")
    else:
        c.set("lora_rank", 8, default(TT, f"{B}:88", "lora_rank 8"), "model.lora_rank")
    d = f.get("model.lora_dropout")
    if d is not None and as_float(d.value) is not None:
        c.set("lora_dropout", as_float(d.value), d.source, "model.lora_dropout")
    else:
        c.set("lora_dropout", 0.0, default(TT, f"{B}:90", "lora_dropout 0.0"), "model.lora_dropout")
    attn = f.get("model.lora_attn_modules")
    names = [str(x) for x in attn.value] if attn is not None and isinstance(attn.value, list) else []
    bad = [n for n in names if n not in ATTN]
    if attn is None or bad or not names:
        c.note(f"{attn.source if attn else 'no model.lora_attn_modules'} (torchtune takes q_proj, k_proj, v_proj, "
               "output_proj: LoRA targets not read, planned as all-linear)")  # fmt: skip
        return
    targets = [ATTN[n] for n in names]
    sources = [attn.source]
    if _on(f, "model.apply_lora_to_mlp"):
        targets += MLP
        sources.append(f["model.apply_lora_to_mlp"].source)
    if _on(f, "model.apply_lora_to_output"):  # LoRA on the output projection: the head's adapter (lora_ends)
        c.set("lora_ends", "head", f["model.apply_lora_to_output"].source, "model.apply_lora_to_output")
    if name in FUSED:  # Phi's checkpoints fuse q/k/v and gate/up
        targets = list(dict.fromkeys({"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
                                      "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj"}.get(t, t) for t in targets))  # fmt: skip
    c.set("lora_targets", ",".join(targets), "; ".join(sources), "model.lora_attn_modules")


def _on(f: dict[str, Flag], key: str) -> bool:
    return key in f and bool(as_bool(f[key].value))
