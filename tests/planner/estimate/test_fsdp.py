"""FSDP2 plans (planner/estimate/fsdp.py): the knob's rules, the per-rank terms, the search ranking them beside ZeRO, and
the exports loaded by the libraries that read them (transformers' TrainingArguments, accelerate's config loader).
The sharded terms are pinned to real fully_shard runs in tests/probes/test_dist.py and
benchmarks/results/fsdp_sharding.json (2 and 4 ranks, fp32 / bf16 / bf16-pure: exact)."""

import json

import pytest

from planner import advise
from planner.config.spec import Goal, Knobs
from planner.errors import BadInput
from planner.estimate import fsdp, state_terms
from planner.estimate.setup import Setup
from planner.export import configs, launch
from planner.export.launch import with_launch
from planner.model import catalog, hardware
from planner.model.shapes import REMOTE_CODE_ONLY
from planner.search.estimates import make_plan


def _plan(mode="full", precision="bf16", offload="none", ckpt="full", nodes=1, model="llama-3.1-8b"):
    hw = hardware.resolve("h100", 8, nodes)
    k = Knobs(precision=precision, fsdp=mode, offload=offload, checkpointing=ckpt)
    spec, goal = catalog.load_model(model), Goal(global_batch=64 * nodes, seq_len=4096)
    return with_launch(make_plan(spec, hw, goal, k, 2), spec, hw, goal), hw


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"fsdp": "full", "zero_stage": 3}, "a plan uses ZeRO or FSDP, not both"),
        ({"fsdp": "full", "offload": "optimizer"}, r"use --offload optimizer\+params"),
        ({"fsdp": "grad-op", "precision": "fp16"}, "FSDP plans run bf16"),
    ],
)
def test_the_knob_rules_refuse_in_one_line(fields, needle):
    with pytest.raises(BadInput, match=needle):
        Knobs.make(**fields)


def test_hybrid_on_one_node_is_refused_by_check():
    req = advise.parse(
        advise.CheckRequest,
        {
            "model": "llama-3.1-8b",
            "gpu": "h100",
            "gpus_per_node": 8,
            "micro_batch": 1,
            "seq_len": 1024,
            "fsdp": "hybrid",
        },
    )
    with pytest.raises(BadInput, match="--fsdp hybrid .* needs --nodes 2 or more"):
        advise.check(req)


def test_sharded_states_and_the_gathered_units():
    p, _ = _plan("full", "bf16")
    s = Setup(catalog.load_model("llama-3.1-8b"), p.knobs, 2, 1, 4096, 8)
    P, N = s.model.params, 8
    assert state_terms.params_bytes(s) == P * 4 // N and state_terms.gradients_bytes(s) == P * 4 // N  # fp32 shards
    assert state_terms.optimizer_bytes(s) == P * 8 // N
    # the root (embeddings, norm, head: 2 x 128,256 x 4,096 + 4,096) and two layers, in bf16
    layer = fsdp.layer_params(s)
    assert fsdp.root_params(s) == 2 * 128256 * 4096 + 4096 and layer * 32 + fsdp.root_params(s) == P
    assert fsdp.unsharded_params_bytes(s) == (fsdp.root_params(s) + 2 * layer) * 2
    grad_op = Setup(s.model, Knobs(precision="bf16", fsdp="grad-op"), 2, 1, 4096, 8)
    assert fsdp.unsharded_params_bytes(grad_op) == P * 2  # every layer kept from forward to backward
    pure = Setup(s.model, Knobs(precision="bf16-pure", fsdp="full"), 2, 1, 4096, 8)
    assert state_terms.params_bytes(pure) == P * 2 // N and state_terms.optimizer_bytes(pure) == P * 4 // N
    hybrid = Setup(s.model, Knobs(precision="bf16", fsdp="hybrid"), 2, 1, 4096, 8, nodes=4)
    assert state_terms.params_bytes(hybrid) == P * 4 // 8  # sharded within the node only
    off = Setup(s.model, Knobs(precision="bf16", fsdp="full", offload="optimizer+params"), 2, 1, 4096, 8)
    assert state_terms.params_bytes(off) == state_terms.optimizer_bytes(off) == 0
    assert state_terms.host_offload_bytes_per_node(off) == 8 * (P * 16 // N)


def test_suggest_ranks_fsdp_plans_beside_zero_and_fsdp_off_leaves_them_out():
    base = {
        "model": "llama-3.1-8b",
        "gpu": "h100",
        "gpus_per_node": 8,
        "global_batch": 64,
        "seq_len": 4096,
        "evidence": "analytic",
        "top": 80,  # FSDP plans that accumulate hold unsharded gradients (fsdp.accumulated_grads_bytes): ranked lower
    }
    plans = advise.suggest(advise.parse(advise.SuggestRequest, base)).plans
    assert {p.fsdp for p in plans} >= {"off", "full", "grad-op"}
    assert all(p.zero_stage == 0 for p in plans if p.fsdp != "off")
    assert "hybrid" not in {p.fsdp for p in plans}  # one node
    off = advise.suggest(advise.parse(advise.SuggestRequest, {**base, "fsdp": ["off"]})).plans
    assert off and all(p.fsdp == "off" for p in off)


def test_hf_arguments_load_in_training_arguments(tmp_path):
    transformers = pytest.importorskip("transformers")
    p, _ = _plan("grad-op")
    args = dict(p.launch.hf_args)
    assert args["fsdp"] == "shard_grad_op auto_wrap" and not args["gradient_checkpointing"]
    assert args["fsdp_config"]["activation_checkpointing"] and args["fsdp_config"]["reshard_after_forward"] is False
    ta = transformers.TrainingArguments(output_dir=str(tmp_path), report_to=[], use_cpu=True, **args)
    plugin = ta.fsdp_plugin_args
    assert plugin["fsdp_version"] == 2 and plugin["reshard_after_forward"] is False
    assert plugin["transformer_cls_names_to_wrap"] == "LlamaDecoderLayer" and plugin["activation_checkpointing"]


def test_accelerate_loads_the_config_file(tmp_path):
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import load_config_from_file

    p, hw = _plan("full", offload="optimizer+params")
    written = launch.emit(p, hw, catalog.load_model("llama-3.1-8b"), str(tmp_path), 4096)
    assert {w.name for w in written} >= {"fsdp_config.json", "accelerate_config.yaml", "train_args.json"}
    cfg = load_config_from_file(str(tmp_path / "accelerate_config.yaml"))
    assert cfg.distributed_type == "FSDP" and cfg.num_processes == 8 and cfg.mixed_precision == "bf16"
    assert cfg.fsdp_config["fsdp_version"] == 2 and cfg.fsdp_config["fsdp_offload_params"] is True
    assert cfg.fsdp_config["fsdp_transformer_layer_cls_to_wrap"] == "LlamaDecoderLayer"
    assert json.loads((tmp_path / "fsdp_config.json").read_text())["cpu_offload"] is True
    assert "--fsdp 'full_shard auto_wrap offload' --fsdp_config fsdp_config.json" in p.launch.command


def _one_per_kind() -> list[str]:
    """The smallest catalog model for each (model_type, language model_type) pair (a new size adds no row)."""
    seen = {}
    for n in sorted(catalog.model_names(), key=lambda n: (catalog.load_model(n).params, n)):
        m = catalog.load_model(n)
        # no transformers class to build (test_remote_families.py); an Omni with its talker resident: no FSDP plan
        # (planner/config/layout.py refuses it)
        if m.model_type not in REMOTE_CODE_ONLY and not m.resident_params():
            seen.setdefault((m.model_type, (m.config.get("text_config") or {}).get("model_type")), n)
    return sorted(seen.values())


@pytest.mark.parametrize("name", _one_per_kind())
def test_the_wrap_classes_are_the_models_own(name):
    """configs.wrap_classes against the `_no_split_modules` of the model and its sub-models (a VLM's vision and
    language models) in the installed transformers, built on the meta device."""
    transformers = pytest.importorskip("transformers")
    import torch

    from recipe import hf_config

    model = catalog.load_model(name)
    config = hf_config(catalog.model_config(name), layers=1)
    auto = transformers.AutoModelForImageTextToText if model.vision is not None else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        built = auto.from_config(config)
    own = set().union(
        *(m._no_split_modules or [] for m in built.modules() if isinstance(m, transformers.PreTrainedModel))
    )
    assert configs.wrap_classes(model) and set(configs.wrap_classes(model)) <= own, own


@pytest.mark.parametrize("name", ["qwen2.5-0.5b", "gemma-2-2b", "qwen2.5-vl-3b"])
def test_check_with_simulated_evidence_traces_one_rank_of_an_fsdp_plan(tmp_path, name):
    """The sim traces one rank (Knobs.for_probe: FSDP2 runs the module in its compute dtype, bf16 under its policy),
    and the plan adds the sharded states and the gathered units analytically."""
    pytest.importorskip("torch")
    from probes import probe_functions

    req = advise.parse(
        advise.CheckRequest,
        {
            "model": name,
            "gpu": "h100",
            "gpus_per_node": 8,
            "micro_batch": 1,
            "seq_len": 512,
            "fsdp": "full",
            "evidence": "sim",
        },
    )
    plan = advise.check(req, store=str(tmp_path / "s.sqlite"), probes=probe_functions()).plan
    analytic = advise.check(req.model_copy(update={"evidence": "analytic"})).plan
    assert plan.evidence == "simulated" and plan.fsdp == "full" and plan.fits
    assert plan.memory.params_bytes == analytic.memory.params_bytes  # the shards: analytic either way
    assert plan.memory.peak_allocated_bytes == pytest.approx(analytic.memory.peak_allocated_bytes, rel=0.1)


def test_alternating_layers_gather_a_routed_and_a_dense_unit():
    """Where routed and dense layers alternate, the gathered units are one of each, not two routed ones (fsdp.
    gathered_layer_units): pinned to FSDP1 on 2 gloo ranks, a tiny Llama-4 text model (tests/probes/test_fsdp1.py,
    BACKWARD_PRE: units of 468,224 and 37,120 bytes in bf16, backward's peak 505,344 = one of each; exact); Llama-4
    Maverick's (interleave_moe_layer_step 2) likewise, Scout's (every layer routed) and a dense model's unchanged."""
    from planner.model.families import from_config
    from probes.fsdp1 import TINY

    config = {"model_type": "llama4_text", "interleave_moe_layer_step": 2, **TINY}  # transformers' defaults beside
    s = Setup(from_config(config, "probe"), Knobs(precision="bf16", fsdp="full"), 1, 1, 32, 2)
    assert [2 * p for p in fsdp.gathered_layer_units(s)] == [468224, 37120]  # measured, exact
    grad_op = Setup(s.model, Knobs(precision="bf16", fsdp="grad-op"), 1, 1, 32, 2)
    assert sum(fsdp.gathered_layer_units(grad_op)) + fsdp.root_params(s) == s.model.params  # every layer once
    for name, alternating in (("llama-4-maverick-17b-128e", True), ("llama-4-scout-17b-16e", False)):
        m = Setup(catalog.load_model(name), Knobs(precision="bf16", fsdp="full", quant="nf4", lora_rank=8), 1, 1, 64, 4)
        routed, second = fsdp.gathered_layer_units(m)
        assert routed == fsdp.layer_params(m) and (second < routed / 40 if alternating else second == routed)
    dense = Setup(catalog.load_model("llama-3.1-8b"), Knobs(precision="bf16", fsdp="full"), 1, 1, 64, 8)
    assert fsdp.gathered_layer_units(dense) == [fsdp.layer_params(dense)] * 2
