"""ms-swift 4's GRPO under Ulysses sequence parallel (Framework.grpo_sp), its own log-probs (Framework.grpo_logprobs)
and its old policy's pass every generation (Framework.grpo_old_logps), from its own examples at v4.5.2."""

from pathlib import Path

import pytest

from planner import advise, checkconfig
from planner.config.spec import Knobs
from planner.config.workload import Workload
from planner.errors import BadInput
from planner.estimate import recipe_terms, temp_terms
from planner.estimate.generation import sequences_per_generation
from planner.estimate.rl import breakdown, computes_old_logps
from planner.estimate.setup import Setup
from planner.model import catalog

SW = Path(__file__).parents[3] / "data/frameworks/swift/examples/train"
SP_GRPO = SW / "sequence_parallel/sequence_parallel_grpo.sh"


def check(path: Path, **flags):
    return checkconfig.check_config([str(path)], {"gpu": "a100-80gb", **flags})


def test_the_example_plans_the_files_global_batch_on_the_ranks_slice():
    """4 completions a device x 8 accumulation x 8 GPUs = 256: the trainer runs 32 micro-steps on 2 data-parallel
    groups of 4; each rank trains on a quarter of every 3,072-token row and scores it whole (ZeRO-3: bf16 logits)."""
    r = check(SP_GRPO)
    p = r.plan
    assert (p.micro_batch, p.grad_accum, p.global_batch, p.sequence_parallel) == (4, 32, 256, 4)
    vocab = catalog.load_model("qwen2.5-7b").text.vocab
    head = recipe_terms.swift_logps_bytes(4, 3072 // 4, vocab, 2, False, True, "slice")
    assert p.memory.detail["logits_loss_bytes"] == p.memory.detail["swift_logps_bytes"] == head


def _setup(sp: int, generation: str = "vllm-colocate", release: str = "", accum: int = 8) -> Setup:
    w = Workload(
        kind="grpo", max_prompt_length=2048, max_completion_length=1024, num_generations=8, generation=generation
    )
    knobs = Knobs(framework="swift", release=release, workload=w, sequence_parallel=sp, zero_stage=3, attention="flash")
    return Setup(catalog.load_model("qwen2.5-7b"), knobs, 4, accum, w.seq_len(), 8, 1)


def test_a_rank_generates_its_share_whole_and_trains_on_its_slice():
    """Each rank's engine samples 4 x 8 completions a generation (rollout_mixin.py:308-330); the 32 micro-steps
    share them out in its group, so the generation counts S x fewer than the micro-steps train on."""
    assert sequences_per_generation(_setup(4, accum=32)) == sequences_per_generation(_setup(1)) == 32
    sp, whole = breakdown(_setup(4, accum=32), 80 << 30), breakdown(_setup(1), 80 << 30)
    assert sp.phases["training: backward"] < whole.phases["training: backward"]


def test_the_kept_logits_are_planned_not_trls_fused_head():
    """Without the split ms-swift's model keeps the completion's 1,025 logits (grpo_trainer.py:1572-1600): at 4 rows
    of 1,024 bf16 tokens under ZeRO-3 2 x 4 x 4,098 x vocabulary bytes, above TRL 1.16's fused head's moment."""
    s = _setup(1)
    assert temp_terms.swift_logps(s) == "kept"
    kept = temp_terms.logits_loss_bytes(s)
    assert kept == recipe_terms.swift_logps_bytes(4, 1024, s.model.text.vocab, 2, False, True, "kept")
    trl = Setup(s.model, s.knobs.model_copy(update={"framework": "trl"}), 4, 8, s.seq_len, 8, 1)
    assert temp_terms.logits_loss_bytes(trl) < kept  # TRL's: a chunk of logits, and its fp32 head gradient


def test_ms_swift_runs_the_old_policys_pass_every_generation_where_trl_skips_it():
    """HF generation aligned with the optimizer step: TRL skips the old log-probs, ms-swift 4 runs them
    (grpo_trainer.py:760-763)."""
    s = _setup(1, generation="hf")
    assert computes_old_logps(s) and "old-logps" in breakdown(s, 80 << 30).phases
    trl = Setup(s.model, s.knobs.model_copy(update={"framework": "trl"}), 4, 8, s.seq_len, 8, 1)
    assert not computes_old_logps(trl)
    assert not computes_old_logps(_setup(1, generation="hf", release="3.7"))


def test_an_accumulation_that_is_not_s_micro_steps_each_is_refused():
    req = {"model": "qwen2.5-7b", "gpu": "a100-80gb", "gpus_per_node": 8, "micro_batch": 4, "grad_accum": 6}
    req |= {"framework": "swift", "sequence_parallel": 4, "zero_stage": 3, "workload": {"kind": "grpo"}}
    with pytest.raises(BadInput, match="an accumulation of 6 micro-steps, a generation every 6, is not one"):
        advise.check(advise.parse(advise.CheckRequest, req))


def test_an_older_line_says_its_split_grpo_is_not_planned():
    with pytest.raises(BadInput, match="the 4 line's is"):
        check(SP_GRPO, framework="swift@3.9")


def test_the_written_script_counts_the_flags_accumulation_and_reads_back(tmp_path):
    """The plan's 32 micro-steps are written as --gradient_accumulation_steps 8 and read back as 32."""
    from planner import intake
    from planner.export import launch

    r = check(SP_GRPO)
    model, hw, goal = r.context
    command = launch.files(r.plan, hw, model, goal.seq_len, goal)["swift_train.sh"]
    assert "--gradient_accumulation_steps 8" in command and "--sequence_parallel_size 4" in command
    script = tmp_path / "a" / "b" / "c" / "train.sh"
    script.parent.mkdir(parents=True)
    script.write_text(command + "\n")
    req = intake.read([str(script)]).request
    assert (req["grad_accum"], req["sequence_parallel"], req["micro_batch"]) == (32, 4, 4)


@pytest.mark.parametrize("sp,accum", [(1, 8), (2, 16), (4, 32)])
def test_a_sequence_parallel_given_beside_the_files_is_the_one_the_accumulation_is_counted_with(sp, accum):
    """--sequence-parallel S over the files' 4: ms-swift would run the files' 8 accumulation steps x S micro-steps,
    the global batch the files' 256 each time."""
    p = check(SP_GRPO, sequence_parallel=sp).plan
    assert (p.sequence_parallel, p.grad_accum, p.global_batch) == (sp, accum, 256)


def test_the_searchs_split_alternatives_run_s_micro_steps_each():
    """check's alternatives may split the rows (sequence_parallel 2, 4, 8 when nothing fits without): each one's
    accumulation and steps per generation are S micro-steps each (the split rule), a rank generating at least one
    row (a full fine-tune under DDP with HF generation once divided by zero here)."""
    req = {"model": "qwen2.5-7b", "gpu": "h100-80gb", "gpus_per_node": 8, "micro_batch": 2, "grad_accum": 1}
    req |= {"framework": "swift", "checkpointing": "full"}
    req["workload"] = {"kind": "grpo", "generation": "hf", "max_completion_length": 4096, "max_prompt_length": 512}
    result = advise.check(advise.parse(advise.CheckRequest, req))
    for p in (result.plan, *result.suggestions):
        sp = p.sequence_parallel
        assert p.grad_accum % sp == 0 and p.workload.steps_per_gen(p.grad_accum) % sp == 0


def test_the_advice_on_ms_swifts_log_probs_names_no_trl_knob():
    """Where ms-swift's own log-probs decide a no-grad or CHORD phase, the advice does not name TRL's --logprobs (which
    ms-swift does not take); TRL's plan keeps it."""
    from planner.search.advice import deciding_term

    def term(framework: str) -> list[str]:
        req = {"model": "qwen2.5-1.5b", "gpu": "h100-80gb", "gpus_per_node": 8, "micro_batch": 2, "grad_accum": 2}
        req |= {"framework": framework, "zero_stage": 3, "workload": {"kind": "grpo", "chord_sft_batch": 1}}
        if framework == "trl":
            req["workload"] = {"kind": "grpo"}
        plan = advise.check(advise.parse(advise.CheckRequest, req)).plan
        memory = plan.memory.model_copy(update={"peak_phase": "old-logps", "peak_term": "forward_transient"})
        return deciding_term(plan.model_copy(update={"memory": memory}))[2]

    assert not any("--logprobs" in f for f in term("swift")) and any("--logprobs" in f for f in term("trl"))
