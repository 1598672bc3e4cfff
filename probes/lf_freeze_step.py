"""One real CPU training step of a model LLaMA-Factory itself prepared for freeze tuning, counted by the live-bytes
tracker (probes.cpu.measure with the model handed in): built from `config` in the compute dtype, then LLaMA-Factory
0.9.5's own prepare_model_for_training (src/llamafactory/model/patcher.py:413-420; its checkpointing function,
model/model_utils/checkpointing.py:80-134, reentrant by default: hparams/model_args.py:149-152) and
_setup_freeze_tuning (model/adapter.py:57-138, trained parameters upcast to fp32 unless pure bf16: :316-325), in the
order its loader runs them (model/loader.py:180, :183). Nothing of LLaMA-Factory's calls enable_input_require_grads
on this path (its checkpointing's new format skips it: checkpointing.py:133-134).
`python probes/lf_freeze_step.py CONFIG_JSON KNOBS_LIST_JSON MICRO SEQ` under LLaMA-Factory's venv (PYTHONPATH the
repository) prints, for each knobs, {"lf": peak, "ours": the recipe's build's peak, "lf_saved" and "ours_saved":
bytes autograd keeps at the end of forward, ...} as a JSON list (tests/probes/test_freeze.py compares them with
the plan)."""

from __future__ import annotations

import json
import sys


def base_model(config: dict, knobs):
    """The transformers model from `config` in the dtype the framework loads it (the compute dtype), the recipe's
    attention kernel, before the framework touches it."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from recipe.attention import attn_implementation
    from recipe.model import weight_dtype

    kw = {"dtype": weight_dtype(knobs)}
    impl = attn_implementation(knobs, "cpu")
    if impl:
        kw["attn_implementation"] = impl
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**config), **kw)
    model.config.use_cache = False
    return model


def lf_model(config: dict, knobs):
    """The model as LLaMA-Factory's loader leaves it for --finetuning_type freeze (use_llama_pro: interleaved; a
    negative freeze_trainable_layers: first)."""
    from llamafactory.hparams import FinetuningArguments, ModelArguments
    from llamafactory.model.adapter import _setup_freeze_tuning
    from llamafactory.model.model_utils.checkpointing import prepare_model_for_training

    from recipe.model import amp

    model = base_model(config, knobs)
    margs = ModelArguments(model_name_or_path="none", disable_gradient_checkpointing=knobs.checkpointing == "off")
    prepare_model_for_training(model, margs)
    fargs = FinetuningArguments(
        finetuning_type="freeze",
        freeze_trainable_layers=-knobs.trained_layers if knobs.trained_layout == "first" else knobs.trained_layers,
        use_llama_pro=knobs.trained_layout == "interleaved",
    )
    _setup_freeze_tuning(model, fargs, is_trainable=True, cast_trainable_params_to_fp32=amp(knobs))
    model.train()
    return model


def saved_at_forward_end(model, case) -> int:
    """Bytes of the distinct storages autograd keeps for backward once the forward has run (saved-tensor hooks;
    a reentrant checkpoint's inputs are counted through its own save_for_backward)."""
    import torch

    from probes.step import autocast_for, inputs, vocab_of

    keep = {}

    def pack(t):
        s = t.untyped_storage()
        keep[s.data_ptr()] = s.nbytes()
        return t

    batch = inputs(case, vocab_of(model))
    ctx = autocast_for(case.knobs, "cpu")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), ctx if ctx is not None else _null():
        loss = model(**batch).loss
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    loss.backward()
    return sum(n for ptr, n in keep.items() if ptr not in params)


def _null():
    from contextlib import nullcontext

    return nullcontext()


def run(config: dict, knobs_kw: dict, micro: int, seq: int) -> dict:
    from planner.config.spec import Knobs
    from probes.cpu import measure
    from probes.step import Case, build_model

    case = Case(config, Knobs(**knobs_kw), micro, 1, seq, 0)
    lf = measure(case, model=lf_model(config, case.knobs))
    ours = measure(case)
    return {
        "lf": lf["peak_allocated_bytes"],
        "lf_phase": lf["phase"],
        "ours": ours["peak_allocated_bytes"],
        "ours_phase": ours["phase"],
        "lf_saved": saved_at_forward_end(lf_model(config, case.knobs), case),
        "ours_saved": saved_at_forward_end(build_model(case), case),
    }


if __name__ == "__main__":
    config, micro, seq = json.loads(sys.argv[1]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps([run(config, kw, micro, seq) for kw in json.loads(sys.argv[2])]))
