"""An RL plan as verl 0.9.1 runs it: `verl_ppo.sh`, `python3 -m verl.trainer.main_ppo` with one Hydra override a
line over its config ppo_trainer.yaml (the hybrid engine: actor, rollout, reference and critic on one GPU pool).

Keys and defaults read from the 0.9.1 wheel (paths under verl/): trainer/config/ppo_trainer.yaml:78 (adv_estimator),
:168,171 (trainer.nnodes, n_gpus_per_node); data/legacy_data.yaml:35,39,42 (max_prompt_length, max_response_length,
train_batch_size in prompts); actor/actor.yaml:18,24,28,33,93,103,113,119 (ppo_mini_batch_size in prompts,
ppo_micro_batch_size_per_gpu in samples, use_dynamic_bsz, ppo_max_token_len_per_gpu, entropy_coeff, use_kl_loss,
kl_loss_coef, ppo_epochs); actor/dp_actor.yaml:26,43 (strategy, entropy_checkpointing); engine/fsdp.yaml:12,16
(param_offload, optimizer_offload); rollout/rollout.yaml:5,46,52,61,64,106-117,127 (name, gpu_memory_utilization,
enforce_eager, free_cache_engine, tensor_model_parallel_size, log-prob micro-batches and budget, n); ref/ref.yaml:16,24, ref/dp_ref.yaml:8 (its
engine: ref.fsdp_config.param_offload);
critic/dp_critic.yaml:14 (the critic's engine under critic.fsdp), critic/critic.yaml:40; workers/config/critic.py:89
(ppo_infer_max_token_len_per_gpu, the budget the v1 trainer uses for the critic, trainer/ppo/v1/trainer_base.py:267-268,
set with +); reward/reward.yaml:29,37 (reward.reward_model.enable, model_path). trainer_base.py:1829-1830: the actor's
mini-batch is ppo_mini_batch_size x rollout.n samples, split over world / Ulysses ranks.
"""

from __future__ import annotations

from planner.config.spec import Goal, Hardware, Plan
from planner.frameworks import FRAMEWORKS, check_plan
from planner.frameworks.verl.keys import KEYS
from planner.model import catalog
from planner.model.modelspec import ModelSpec

VERSION = "verl 0.9.1"
SCRIPT_NAME = "verl_ppo.sh"
ENTRY = "verl.trainer.main_ppo"
ESTIMATOR = {"ppo": "gae", "grpo": "grpo", "rloo": "rloo", "reinforce++": "reinforce_plus_plus"}
ENTROPY_COEFF = 0.001  # an entropy term's coefficient when the plan computes one (verl's examples)

Override = tuple[str, object]


def files(plan: Plan, model: ModelSpec, hw: Hardware, goal: Goal | None = None) -> dict[str, str]:
    return {SCRIPT_NAME: script(plan, model, hw, goal)}


def command(plan: Plan, hw: Hardware) -> str:
    check(plan)
    return f"bash {SCRIPT_NAME}"


# the release lines read, never written: their versions take none of the files this writes
def check(plan: Plan) -> None:
    """ValueError for what verl's hybrid engine cannot run as planned (its rules: planner/frameworks/verl/__init__.py)
    and for a line read but never written (the 0.5 line's rule of scope "written"); the 0.6 line takes every key
    written (v0.6.0 verl/trainer/config/*.yaml, each override's key checked there)."""
    check_plan("verl", plan)


def version(plan: Plan) -> str:
    """What a file's headline names: the adapter's version, or the release line planned."""
    return f"verl@{plan.release}" if plan.release else VERSION


def word(value: object) -> str:
    """A Hydra override's value as verl's examples write it (true/false, numbers without trailing zeros)."""
    if isinstance(value, bool):
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


def headline(plan: Plan, hw: Hardware) -> str:
    m = plan.memory
    return (
        f"# memplan plan for {version(plan)} ({plan.workload.kind.upper()}): {m.device_total_bytes / 2**30:.1f} of "
        f"{m.capacity_bytes / 2**30:.1f} GiB per GPU at its peak ({m.peak_term.split(': ')[0]}, {m.peak_phase}), "
        f"{hw.gpu.name}"
    )


def script(plan: Plan, model: ModelSpec, hw: Hardware, goal: Goal | None = None) -> str:
    check(plan)
    pairs = overrides(plan, model, hw) + media_overrides(plan, goal) + limit_overrides(goal)
    lines = [
        "#!/bin/bash",
        (
            f"# memplan plan for {version(plan)} ({plan.workload.kind.upper()}): {plan.memory.device_total_bytes / 2**30:.1f} of "
            f"{plan.memory.capacity_bytes / 2**30:.1f} GiB per GPU at its peak ({plan.memory.peak_phase}), {hw.gpu.name}"
        ),
        "# model paths: the Hugging Face ids; give your local paths. data.train_files: your parquet of prompts",
        "python3 -m " + ENTRY + " \\",
    ]
    lines += [f"    {k}={word(v)}" + (" \\" if i < len(pairs) - 1 else "") for i, (k, v) in enumerate(pairs)]
    return "\n".join(lines) + "\n"


def overrides(plan: Plan, model: ModelSpec, hw: Hardware) -> list[Override]:
    w, r = plan.workload, plan.workload.roles
    n = w.num_generations
    spg = w.steps_per_gen(plan.grad_accum)
    out: list[Override] = [
        (KEYS.key("workload.kind"), ESTIMATOR[w.kind]),
        ("data.train_files", "YOUR_TRAIN.parquet"),
        (KEYS.key("rollout_batch"), plan.micro_batch * plan.data_parallel * spg // n),
        (KEYS.key("workload.max_prompt_length"), w.prompt_tokens()),
        (KEYS.key("workload.max_completion_length"), w.max_completion_length),
        (KEYS.key("model"), catalog.model_path(model)),
        (KEYS.key("checkpointing"), plan.checkpointing == "full"),
        (KEYS.key("remove_padding"), r.resolved("verl").remove_padding),
        (KEYS.key("strategy"), "fsdp2"),
        (KEYS.key("mini_batch"), plan.global_batch // n),
        (KEYS.key("workload.num_iterations"), w.num_iterations),
        (KEYS.key("kl_loss"), w.beta > 0),
        (KEYS.key("kl_loss_coef"), w.beta if w.beta > 0 else 0.001),
        (KEYS.key("entropy"), ENTROPY_COEFF if r.entropy != "off" else 0),
        (KEYS.key("entropy_checkpointing"), r.entropy == "checkpointed"),
        (KEYS.key("actor_param_offload"), "actor-params" in r.offload),
        (KEYS.key("actor_optimizer_offload"), "actor-optimizer" in r.offload),
        (KEYS.key("offload"), plan.offload != "none"),
        (KEYS.key("ref_param_offload"), "ref" in r.offload),
        (KEYS.key("fsdp"), plan.fsdp != "grad-op"),
    ]
    if plan.sequence_parallel > 1:  # the actor's Ulysses, which the reference follows (ref/dp_ref.yaml:39)
        out.append((KEYS.key("sequence_parallel"), plan.sequence_parallel))
    if r.fused_kernels:  # the chunked log-prob head (off by default: model/hf_model.yaml:61)
        out.append((KEYS.key("workload.roles.fused_kernels"), True))
    out += budget_overrides(plan) + rollout_overrides(plan) + critic_overrides(plan, model) + reward_overrides(plan)
    return out + [
        (KEYS.key("nodes"), hw.nodes),
        (KEYS.key("gpus_per_node"), hw.gpus_per_node),
        ("trainer.logger", "[console]"),
    ]


def writes_pixels(line: str) -> bool:
    """Whether the line's script takes the images' pixel bounds (planner.export.launch): the newest line's, pinned to
    0.9.1, whose data.mm_processor_kwargs the v0.7.0 config lacks (trainer/config/data/legacy_data.yaml there)."""
    return line in ("", FRAMEWORKS["verl"].newest.name)


def media_overrides(plan: Plan, goal: Goal | None) -> list[Override]:
    """The pixel bounds each image was planned within (Goal.pixels) as the processor's kwargs, data.mm_processor_kwargs
    ({} by default: 0.9.1 trainer/config/data/legacy_data.yaml:121-122), which the agent loop's token builder passes to
    the processor call that makes the actor's pixel_values (utils/tokenizer/continuous_token.py:447,1169-1180;
    experimental/agent_loop/agent_loop.py:243,252); transformers' Qwen2-VL image processor takes them as its size when
    both are given (5.10.4 models/qwen2_vl/image_processing_qwen2_vl.py:132-133)."""
    if goal is None or goal.pixels is None or not writes_pixels(plan.release):
        return []
    return [
        ("+data.mm_processor_kwargs.min_pixels", goal.pixels[0]),
        ("+data.mm_processor_kwargs.max_pixels", goal.pixels[1]),
    ]


def limit_overrides(goal: Goal | None) -> list[Override]:
    """The images a row was planned to hold (Goal.images) where more than one: rollout.limit_images, which verl hands
    vLLM as limit_mm_per_prompt {"image": N} (0.9.1 workers/config/rollout.py:257, vllm_async_server.py:287-290; v0.6.0
    workers/config/rollout.py:177, vllm_async_server.py:190-191), vLLM refusing a prompt with more (planner.frameworks.
    mmlimit). No YAML holds the key (the dataclass field only), so it is added with "+"."""
    if goal is None or not goal.images or goal.images <= 1:
        return []
    return [(f"+{KEYS.key('images')}", goal.images)]


def budget_overrides(plan: Plan) -> list[Override]:
    r = plan.workload.roles
    dynamic = bool(r.max_tokens_per_gpu or r.logprob_max_tokens_per_gpu)
    out: list[Override] = [(KEYS.key("dynamic_batch"), dynamic)]
    if dynamic:  # micro-batches cut by tokens: verl reads no micro-batch size (workers/engine/utils.py:108-121)
        longest = plan.workload.seq_len()
        out.append((KEYS.key("max_tokens_per_gpu"), r.max_tokens_per_gpu or longest * plan.micro_batch))
        logprob = r.logprob_max_tokens_per_gpu or longest * plan.micro_batch
        return out + [
            (KEYS.key("logprob_max_tokens_per_gpu"), logprob),
            (KEYS.key("ref_logprob_max_tokens_per_gpu"), r.ref_logprob_max_tokens_per_gpu or logprob),
        ]
    return out + [
        (KEYS.key("micro_batch"), plan.micro_batch),
        (KEYS.key("logprob_micro_batch"), r.logprob_micro_batch or plan.micro_batch),
        (KEYS.key("ref_logprob_micro_batch"), r.ref_logprob_micro_batch or plan.micro_batch),
    ]


def rollout_overrides(plan: Plan) -> list[Override]:
    r = plan.workload.roles.resolved("verl")
    return [
        (KEYS.key("rollout_engine"), r.rollout_engine),
        (KEYS.key("workload.num_generations"), plan.workload.num_generations),
        (KEYS.key("rollout_tp"), r.rollout_tp),
        (KEYS.key("rollout_memory"), r.rollout_memory),
        (KEYS.key("sleep_level"), r.sleep_level != 0),
        (KEYS.key("rollout_eager"), r.rollout_eager),
    ]


def critic_overrides(plan: Plan, model: ModelSpec) -> list[Override]:
    if plan.workload.kind != "ppo":
        return []
    r = plan.workload.roles.resolved("verl")
    path = r.critic_model or catalog.hf_id(model.name) or model.name
    return [
        (KEYS.key("critic_model"), catalog.hf_id(path) or path),
        *(
            []
            if r.max_tokens_per_gpu or r.logprob_max_tokens_per_gpu
            else [(KEYS.key("critic_micro_batch"), plan.micro_batch)]
        ),
        (f"+{KEYS.key('critic_max_tokens_per_gpu')}", r.critic_max_tokens_per_gpu),
        (KEYS.key("critic_checkpointing"), plan.checkpointing == "full"),
        (KEYS.key("critic_param_offload", plan.release), "critic-params" in r.offload),
        (KEYS.key("critic_optimizer_offload", plan.release), "critic-optimizer" in r.offload),
        (KEYS.key("critic_offload", plan.release), plan.offload != "none"),
        (KEYS.key("critic_strategy"), "fsdp2"),
    ]


def reward_overrides(plan: Plan) -> list[Override]:
    r = plan.workload.roles
    if not r.reward_model:
        return []
    share = [(KEYS.key("reward_memory"), r.reward_memory)] if r.reward_memory else []
    return share + [
        (KEYS.key("reward_enable"), True),
        (KEYS.key("reward_model"), catalog.hf_id(r.reward_model) or r.reward_model),
    ]
