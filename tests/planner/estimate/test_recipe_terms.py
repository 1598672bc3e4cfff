"""The recipe knobs' rules, shapes and exports (planner/estimate/recipe_terms.py, planner/estimate/lora.py, planner/export/export.py); their memory
terms are pinned to the sim probe in tests/probes/test_recipe_sim.py."""

import pytest

from planner import advise
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.estimate import quant, recipe_terms
from planner.estimate.memory import breakdown
from planner.estimate.setup import Setup
from planner.export import export
from planner.model import catalog

LLAMA = catalog.load_model("llama-3.2-1b")


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"optimizer_in_backward": True, "zero_stage": 2}, "--optimizer-in-backward"),
        ({"optimizer_in_backward": True, "precision": "fp16"}, "loss scaler"),
        ({"quant": "nf4"}, "--quant nf4 needs LoRA adapters"),
        ({"lora_dropout": 0.1}, "--lora-dropout 0.1 needs LoRA adapters"),
        ({"lora_vision": True}, "--lora-vision True needs LoRA adapters"),
        ({"vit_checkpointing": "off"}, "--vit-checkpointing off: the tower checkpoints only beside"),
        ({"lora_vision": True, "lora_rank": 8, "lora_targets": "attention"}, "with --lora-targets all-linear"),
        ({"quant": "nf4", "lora_rank": 8, "zero_stage": 3, "offload": "optimizer+params"}, "offloaded to the host"),
        ({"checkpointing": "every-9"}, "--checkpointing 'every-9'"),
        ({"loss": "liger"}, "--loss 'liger'"),
    ],
)
def test_bad_knob_combinations_are_one_line_errors(fields, needle):
    with pytest.raises(BadInput) as e:
        Knobs.make(**fields)
    assert needle in str(e.value)


def check(**kw):
    base = {"model": "llama-3.2-1b", "gpu": "h100", "micro_batch": 2, "seq_len": 2048}
    return advise.check(advise.parse(advise.CheckRequest, {**base, **kw}))


def test_optimizer_in_backward_needs_one_micro_step_on_one_gpu():
    with pytest.raises(BadInput, match="--grad-accum 1 on one GPU"):
        check(optimizer_in_backward=True, grad_accum=2)
    with pytest.raises(BadInput, match="--grad-accum 1 on one GPU"):
        check(optimizer_in_backward=True, gpus_per_node=2)
    out = check(optimizer_in_backward=True)
    assert out.plan.optimizer_in_backward and all(p.grad_accum == 1 for p in out.suggestions)
    # no full set of gradients: the gradient term is one matrix's, far below the plain run's
    assert out.plan.memory.detail["model_states_bytes"] < check().plan.memory.detail["model_states_bytes"]


def test_lora_targets_must_name_the_models_linears():
    with pytest.raises(BadInput, match="--lora-targets wq: not a linear of llama-3.2-1b"):
        check(lora_rank=8, lora_targets="wq")
    assert check(lora_rank=8, lora_targets="q_proj,v_proj").plan.lora_targets == "q_proj,v_proj"


def test_lora_counts_by_target():
    r = 16
    q, kv, o = (
        (LLAMA.text.q_dim, LLAMA.text.hidden),
        (LLAMA.text.kv_dim, LLAMA.text.hidden),
        (LLAMA.text.hidden, LLAMA.text.q_dim),
    )
    per_layer = r * (sum(q) + 2 * sum(kv) + sum(o))
    assert LLAMA.lora_params(r, "attention") == LLAMA.text.layers * per_layer
    assert LLAMA.lora_params(r, "q_proj,v_proj") == LLAMA.text.layers * r * (sum(q) + sum(kv))
    assert LLAMA.lora_params(r, "all-linear") > LLAMA.lora_params(r, "attention")


def test_four_bit_storage_is_qloras_figure():
    """QLoRA (Dettmers et al. 2023, section 3): 4 bits a weight plus 8/64 + 32/(64 x 256) = 0.127 bits of
    double-quantized constants."""
    assert quant.stored_bytes_per_weight("nf4") * 8 == pytest.approx(4 + 0.127, abs=5e-4)


def test_quantized_base_and_dequantized_transient():
    dense = Setup(LLAMA, Knobs.make(lora_rank=16), 1, 1, 512)
    four = Setup(LLAMA, Knobs.make(lora_rank=16, quant="nf4"), 1, 1, 512)
    linear = quant.quantized_weights(LLAMA)
    saved = breakdown(dense, 80 << 30).params_bytes - breakdown(four, 80 << 30).params_bytes
    assert saved == pytest.approx(linear * (2 - quant.stored_bytes_per_weight("nf4")), rel=1e-6)
    biggest = max(t.numel // t.count for t in LLAMA.tensors if t.lora)
    assert quant.dequantized_weight_bytes(LLAMA, "nf4", 2) == 2 * biggest


def test_packed_rows_and_attention_shapes():
    k = Knobs.make(batching="packed")
    assert recipe_terms.row_shape(k, 4, 1024) == (1, 4096)
    assert recipe_terms.text_spec(LLAMA.text, Knobs.make(attention="flash")).attention == "flash"
    gemma = catalog.load_model("gemma-2-2b").text
    assert recipe_terms.text_spec(gemma, Knobs()).attention == "eager"  # SDPA cannot softcap: the family stays eager


def test_every_n_and_selective_checkpointing():
    assert recipe_terms.checkpointed_layers(Knobs.make(checkpointing="every-4"), 16) == 4
    assert recipe_terms.checkpointed_layers(Knobs.make(checkpointing="every-3"), 16) == 5
    assert recipe_terms.checkpointed_layers(Knobs.make(checkpointing="selective-op"), 16) == 16
    # selective-op keeps every second mm's output: Llama q, v, gate, down; Qwen2's biased q/k/v run addmm
    names = [w for w, _, _ in recipe_terms.recomputed_linears(LLAMA.text)]
    assert names == [LLAMA.text.kv_dim, LLAMA.text.hidden, LLAMA.text.intermediate]  # k, o, up recomputed


@pytest.mark.parametrize(
    "fields,bundled",
    [
        ({"checkpointing": "selective-op"}, True),
        ({"checkpointing": "offload-inputs"}, True),  # HF's Trainer keeps the checkpoints' inputs on the device
        ({"loss": "chunked"}, True),
        ({"checkpointing": "full"}, False),
        ({"loss": "fused"}, False),
        ({"batching": "packed", "attention": "flash"}, False),
    ],
)
def test_plans_hf_cannot_run_launch_the_bundled_trainer(fields, bundled):
    plan = check(**fields).plan
    assert bool(export.bundled_only(plan)) == bundled
    assert plan.launch.command.startswith("planner train") == bundled == (plan.launch.note is not None)
    args = plan.launch.hf_args
    assert args.get("use_liger_kernel", False) == (plan.loss != "standard")
    assert args.get("padding_free", False) == (plan.batching == "packed")


def test_qlora_exports():
    plan = check(
        lora_rank=16, quant="nf4", lora_targets="attention", lora_train_embeddings=True, lora_dropout=0.05
    ).plan
    assert plan.launch.quantization_config == {
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
        "bnb_4bit_compute_dtype": "bfloat16",
    }
    peft = plan.launch.peft_config
    assert peft["modules_to_save"] == ["embed_tokens", "lm_head"] and peft["lora_dropout"] == 0.05
    assert "q_proj" in peft["target_modules"] and "gate_proj" not in peft["target_modules"]
    assert "--load_in_4bit" in plan.launch.command and "--use_bnb_nested_quant" in plan.launch.command


def _swift_grpo(release: str, model: str = "qwen2.5-vl-3b", image_tokens: int = 768) -> Setup:
    """ms-swift GRPO, full fine-tuning, 8 rows of a 2,048-token prompt and a 1,024-token completion (swift-4311's)."""
    from planner.config.workload import Workload

    w = Workload(kind="grpo", max_prompt_length=2048, max_completion_length=1024, num_generations=8)
    knobs = Knobs(precision="bf16", checkpointing="full", framework="swift", release=release, workload=w)
    return Setup(catalog.load_model(model), knobs, 8, 1, w.seq_len(), 4, 1, image_tokens=image_tokens)


def test_ms_swift_3_2_to_3_6_score_a_vlms_rows_from_its_whole_logits():
    """ms-swift 3.2-3.6 call a multimodal model without logits_to_keep (v3.4.1 grpo_trainer.py:1181-1197): its
    logits over the 3,072 tokens and the completion's scaled slice (tests/probes/test_whole_logits.py); 3.7 passes
    logits_to_keep, its kept logits divided into a copy, and the 4 line divides them in place (swift_logps_bytes); a
    text model goes through TRL's own path in the 3 and 3.4 lines."""
    from planner.estimate import memory as mem
    from planner.estimate import temp_terms
    from planner.estimate.rl import logps_pass_terms

    for release in ("3", "3.4"):
        s = _swift_grpo(release)
        t = s.model.text
        whole = recipe_terms.whole_logits_logps_bytes(t, 8, 3072, 1024, "half")
        assert temp_terms.whole_logits(s) and temp_terms.logits_loss_bytes(s) == whole == 2 * 8 * 4096 * t.vocab
        assert logps_pass_terms(s)["forward_transient_bytes"] >= whole
        assert mem.breakdown(s, 96 * 10**9).detail["whole_logits_bytes"] == whole
    s = _swift_grpo("3.7")  # the kept logits divided into a copy, fp32 under DDP (test_swift_logps)
    copied = recipe_terms.swift_logps_bytes(8, 1024, s.model.text.vocab, 2, True, True, "copied")
    assert not temp_terms.whole_logits(s) and temp_terms.logits_loss_bytes(s) == copied
    s = _swift_grpo("")  # the 4 line's own log-probs over the kept logits, fp32 under DDP (test_swift_logps)
    kept = recipe_terms.swift_logps_bytes(8, 1024, s.model.text.vocab, 2, True, True, "kept")
    assert not temp_terms.whole_logits(s) and temp_terms.logits_loss_bytes(s) == kept
    text = _swift_grpo("3.4", model="qwen2.5-3b", image_tokens=0)  # TRL 0.17's _get_per_token_logps: copied
    assert not temp_terms.whole_logits(text) and temp_terms.swift_logps(text) == "copied"
