"""GRPO / DPO planning (planner/config/workload.py, planner/estimate/rl.py, planner/search/lengths.py) without torch: TRL's rules as bad
input, the phases each workload runs, the published KV-cache size, and the 6 x H20 report's answer."""

import pytest

from planner import advise
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.estimate.rl import breakdown, kv_cache_bytes
from planner.estimate.setup import Setup
from planner.model.catalog import load_model

REPORT = {
    "model": "qwen2.5-vl-3b",
    "gpu": "h20",
    "gpus_per_node": 6,
    "micro_batch": 4,
    "grad_accum": 1,
    "zero": 3,
    "precision": "bf16",
    "checkpointing": "full",
    "attention": "flash",
    "image_tokens": 16384,
    "workload": {
        "kind": "grpo",
        "num_generations": 4,
        "max_prompt_length": 16640,
        "max_completion_length": 2048,
        "beta": 0.04,
    },
}


def test_kv_cache_is_128_kib_per_token_for_llama_3_8b_in_bf16():
    """2 (k, v) x 32 layers x 8 kv heads x 128 dims x 2 bytes = 131,072 bytes a token (the figure vLLM's and
    NVIDIA's sizing guides give for Llama-3-8B)."""
    w = Workload(kind="grpo", max_prompt_length=1, max_completion_length=1)
    s = Setup(load_model("llama-3.1-8b"), Knobs(workload=w), 1, 1, w.seq_len())
    assert kv_cache_bytes(s, sequences=3, tokens=1000) == 3 * 1000 * 131072


@pytest.mark.parametrize(
    "fields,match",
    [
        ({"kind": "sft", "num_generations": 4}, "--num-generations is a GRPO input"),
        ({"kind": "grpo", "max_length": 2048}, "--max-length is a DPO input"),
        ({"kind": "grpo", "vllm_gpu_memory_utilization": 0.5}, "needs --generation vllm-colocate"),
        ({"kind": "dpo", "max_length": 512, "max_prompt_length": 512}, "leaves no completion"),
        ({"kind": "sft", "logprobs": "full"}, "needs --workload dpo or grpo"),
    ],
)
def test_workload_inputs_out_of_place_are_one_line_errors(fields, match):
    with pytest.raises(ValueError, match=match):  # a BadInput inside pydantic's error; faces print the line
        Workload(**fields)


def test_trl_trainers_recipe_only():
    with pytest.raises(BadInput, match="--checkpointing selective-op with --workload grpo"):
        Knobs.make(checkpointing="selective-op", workload=Workload(kind="grpo"))
    with pytest.raises(BadInput, match="--loss chunked with --workload dpo"):
        Knobs.make(loss="chunked", workload=Workload(kind="dpo"))


def test_groups_of_generations_and_the_derived_sequence():
    req = {
        "model": "qwen2.5-0.5b",
        "gpu": "h100",
        "gpus_per_node": 2,
        "global_batch": 18,
        "workload": {"kind": "grpo", "num_generations": 4},
    }
    with pytest.raises(BadInput, match="--global-batch 18 is not divisible by --num-generations 4"):
        advise.suggest(advise.parse(advise.SuggestRequest, req))
    with pytest.raises(BadInput, match="--seq-len with --workload grpo"):
        advise.suggest(advise.parse(advise.SuggestRequest, {**req, "global_batch": 16, "seq_len": 4096}))
    res = advise.suggest(advise.parse(advise.SuggestRequest, {**req, "global_batch": 16}))
    assert res.goal["seq_len"] == 512 + 512  # TRL's default completion, the default prompt
    for p in res.plans:  # every split samples whole groups
        assert p.micro_batch * p.world_size * p.grad_accum % 4 == 0
        assert p.launch.hf_args["num_generations"] == 4


def test_phases_each_workload_runs():
    model = load_model("qwen2.5-0.5b")

    def phases(mb, accum, lora=0, **w):
        wl = Workload(**w)
        return {
            k.split(":")[0]
            for k in breakdown(
                Setup(model, Knobs(workload=wl, lora_rank=lora), mb, accum, wl.seq_len()), 80 * 2**30
            ).phases
        }

    assert phases(4, 2, kind="grpo") == {"training", "generation"}  # beta 0: no reference
    assert phases(4, 2, kind="grpo", beta=0.04) == {"training", "generation", "reference-forward"}
    assert phases(4, 2, kind="grpo", num_iterations=2) == {"training", "generation", "old-logps"}
    # IS correction; the trainer's ranks gather the weights for the server
    assert phases(4, 2, kind="grpo", generation="vllm-server") == {"training", "old-logps", "weight-sync"}
    assert phases(4, 2, kind="grpo", generation="vllm-colocate") == {
        "training",
        "generation",
        "old-logps",
        "weight-sync",
    }
    assert phases(2, 1, kind="dpo") == {"training", "reference-forward"}
    assert phases(2, 1, kind="dpo", precompute_ref_log_probs=True) == {"training"}
    s = Setup(model, Knobs(workload=Workload(kind="dpo"), lora_rank=16), 2, 1, 1024)
    assert breakdown(s, 80 * 2**30).detail["reference_params_bytes"] == 0  # PEFT: adapter disabled


def test_generation_batch_is_the_whole_rank_share_by_default():
    """steps_per_generation defaults to the accumulation: splitting a rank's completions into more micro-steps
    does not shrink the KV cache of the one generation that samples them all."""
    model = load_model("qwen2.5-0.5b")
    w = Workload(kind="grpo", max_completion_length=4096)
    kv = [
        breakdown(Setup(model, Knobs(workload=w), mb, 16 // mb, w.seq_len()), 80 * 2**30).detail["kv_cache_bytes"]
        for mb in (1, 4, 16)
    ]
    assert kv[0] == kv[1] == kv[2] > 0


def test_the_6_x_h20_report():
    """TRL 1.16's fused head fits at every length; VLM-R1's full logits do not: they add tens of GiB at the
    training backward, and the configuration fits only while a step's images stay small: the report's OOM "after 4
    steps"."""
    fused = advise.check(advise.parse(advise.CheckRequest, REPORT))
    assert fused.plan.fits and fused.limits["image_tokens_fit_up_to"] == 16384
    full_req = {**REPORT, "workload": {**REPORT["workload"], "logprobs": "full"}}
    full = advise.check(advise.parse(advise.CheckRequest, full_req))
    m = full.plan.memory
    assert not full.plan.fits and m.peak_phase == "backward"
    assert m.detail["logprobs_bytes"] > 10 * fused.plan.memory.detail["logits_loss_bytes"]
    assert 0 < full.limits["image_tokens_fit_up_to"] < 16384
    assert full.suggestions and all(p.fits and p.global_batch == 24 for p in full.suggestions)


def test_a_smaller_generation_batch_is_searched_when_the_default_does_not_fit():
    """TRL's default steps_per_generation (the accumulation) samples a rank's whole share at once; when that
    KV cache does not fit, suggest tries steps_per_generation among the accumulation's divisors, and exports it."""
    req = {
        "model": "qwen2.5-7b",
        "gpu": "a100-40gb",
        "gpus_per_node": 8,
        "global_batch": 512,
        "workload": {"kind": "grpo", "num_generations": 8, "max_prompt_length": 1024, "max_completion_length": 16384},
    }
    plans = advise.suggest(advise.parse(advise.SuggestRequest, req)).plans
    smaller = [p for p in plans if p.workload.steps_per_generation]
    assert smaller and all(p.workload.steps_per_generation < p.grad_accum for p in smaller)
    assert all(p.launch.hf_args["steps_per_generation"] == p.workload.steps_per_generation for p in smaller)


def test_resident_terms_of_every_phase():
    """A colocated vLLM reserves its share of the card in every phase; ZeRO-3 gathers the whole model for HF
    generation (TRL's ds3_gather_for_generation, on by default), a full copy beside each rank's shard
    (tests/probes/test_sync.py measures it)."""
    model = load_model("qwen2.5-0.5b")
    cap = 80 * 2**30
    w = Workload(kind="grpo", generation="vllm-colocate", vllm_gpu_memory_utilization=0.4)
    m = breakdown(Setup(model, Knobs(workload=w), 4, 2, w.seq_len(), gpus_per_node=8), cap)
    assert m.detail["vllm_reserved_bytes"] == int(0.4 * cap)
    w = Workload(kind="grpo")
    z3 = breakdown(Setup(model, Knobs(workload=w, zero_stage=3), 4, 2, w.seq_len(), gpus_per_node=8), cap)
    assert z3.detail["generation_weights_bytes"] == model.params * 2


def test_swift_35_scores_the_reference_after_the_policys_forward():
    """ms-swift v3.5.0-v3.6.4's GRPO runs the reference's log-prob pass inside `_compute_loss`, after the policy's
    forward (v3.5.0 grpo_trainer.py:1091, :1095-1100): the policy's saved activations and its head's saved
    log_softmax stay live beside it. 3.0-3.3 and 3.7 on score it before the micro-step, as TRL does."""
    from planner.estimate import ref_in_step
    from planner.estimate.rl import logps_pass_terms, phase_terms

    model = load_model("qwen2.5-vl-3b")
    w = Workload(kind="grpo", beta=0.04, num_generations=8, max_prompt_length=2048, max_completion_length=1024)

    def ref_phase(release):
        s = Setup(model, Knobs(workload=w, framework="swift", release=release, zero_stage=3), 8, 4, w.seq_len(), 4)
        training = breakdown(s, 96 * 2**30)
        return s, phase_terms(s, 96 * 2**30, training)["reference-forward"]

    s, in_step = ref_phase("3.4")
    assert ref_in_step.grpo_reference_in_step(s)
    assert in_step["saved_activations_bytes"] > 0 and in_step["grads_bytes"] > 0
    assert in_step["policy_logps_bytes"] == 2 * 8 * 1024 * model.text.vocab + 8 * 8 * 1024
    assert in_step["forward_transient_bytes"] == logps_pass_terms(s)["forward_transient_bytes"]
    for release in ("3", "3.7"):
        s, between = ref_phase(release)
        assert not ref_in_step.grpo_reference_in_step(s)
        assert "saved_activations_bytes" not in between and "policy_logps_bytes" not in between
