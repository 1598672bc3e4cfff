"""An RL plan as OpenRLHF 0.11.2 runs it: `openrlhf_ppo.sh`, `python3 -m openrlhf.cli.train_ppo_ray` with its dotted
flags (cli/train_ppo_ray.py, the parser of 0.11.2; the flat names of 0.10.1 are refused there). Roles on their own
GPUs (--{actor,ref,critic,reward}.num_gpus_per_node, vLLM engines x tensor-parallel size), or all on the actor's
(--train.colocate_all: then the engines must fill the actor's GPUs, :56-64).

Memory flags: --ds.zero_stage, --ds.adam_offload, --ds.enable_sleep (optimizer states, gradients and fp32 master
weights to the host between phases, utils/deepspeed/deepspeed_utils.py:151-188), --ref.offload / --reward.offload
(DeepSpeed's param offload: under ZeRO-3 only), --vllm.gpu_memory_utilization, --vllm.enable_sleep (level 1, only with
--train.colocate_all, :707-709), --train.dynamic_batch_enable with --train.max_tokens_per_gpu and
--rollout.max_tokens_per_gpu, --ds.packing_samples.
"""

from __future__ import annotations

from planner.config.roles import Group, existing_roles
from planner.config.spec import Goal, Hardware, Plan
from planner.frameworks import check_plan
from planner.frameworks.openrlhf.keys import KEYS
from planner.model import catalog
from planner.model.lora_targets import peft_target_modules
from planner.model.modelspec import ModelSpec

VERSION = "openrlhf 0.11.2"
SCRIPT_NAME = "openrlhf_ppo.sh"
ENTRY = "openrlhf.cli.train_ppo_ray"
ESTIMATOR = {"ppo": "gae", "grpo": "group_norm", "rloo": "rloo", "reinforce++": "reinforce"}
REWARD_URL = "YOUR_REWARD_FUNCTION.py"


def files(plan: Plan, model: ModelSpec, hw: Hardware, seq_len: int, goal: Goal | None = None) -> dict[str, str]:
    if plan.workload.kind in ONE_TRAINER:
        name, module = ONE_TRAINER[plan.workload.kind]
        length = plan.workload.max_length if plan.workload.kind == "dpo" else seq_len
        return {name: dpo_script(plan, model, hw, module, length)}
    return {SCRIPT_NAME: script(plan, model, hw)}


def writes_pixels(plan: Plan) -> bool:
    """No file of OpenRLHF 0.11.2 takes an image's pixel bounds, so the note says the cap (planner.export.launch): its
    VLM path calls the model's own AutoProcessor (utils/utils.py:59) with no pixel kwargs (utils/vlm_utils.py:106,
    `processor(text=[prompt], images=pil_images, ...)`), and train_ppo_ray's image flags are --data.image_key and
    --data.max_images_per_prompt only (cli/train_ppo_ray.py:607-611): the bounds are the checkpoint's
    preprocessor_config.json."""
    return False


def command(plan: Plan, hw: Hardware) -> str:
    if plan.workload.kind in ONE_TRAINER:
        return f"bash {ONE_TRAINER[plan.workload.kind][0]}"
    check(plan)
    return f"bash {SCRIPT_NAME}"


DPO_SCRIPT = "openrlhf_dpo.sh"
# the one-trainer runs: workload -> (script, module): DPO (cli/train_dpo.py: the policy and its reference) and SFT
# (cli/train_sft.py), each under the deepspeed launcher
ONE_TRAINER = {"dpo": (DPO_SCRIPT, "openrlhf.cli.train_dpo"), "sft": ("openrlhf_sft.sh", "openrlhf.cli.train_sft")}


def dpo_script(
    plan: Plan, model: ModelSpec, hw: Hardware, module: str = "openrlhf.cli.train_dpo", length: int | None = None
) -> str:
    """DPO or SFT through `deepspeed --module M` (ONE_TRAINER), at `length` tokens (DPO's: its workload's)."""
    check(plan)
    flag = at(plan)
    launcher = ["deepspeed", "--num_nodes", str(hw.nodes), "--num_gpus", str(hw.gpus_per_node)]
    flags = [
        flag("policy_model", hf(model.name)),
        flag("dataset", "YOUR_PAIRS" if module.endswith("dpo") else "YOUR_DATA"),
        flag("output_dir", "./ckpt"),
        flag("global_batch", plan.global_batch),
        flag("micro_batch", plan.micro_batch),
        flag("seq_len", plan.workload.max_length if length is None else length),
        flag("zero_stage", plan.zero_stage),
        flag("precision", plan.precision),
        flag("attention", KEYS["attention"].write(plan.attention)),
    ]
    flags += [flag("policy_checkpointing")] if plan.checkpointing == "full" else []
    flags += [flag("offload")] if plan.offload == "optimizer" else []
    flags += lora_flags(plan, model, flag)
    flags = [f for f in flags if f]  # 0.8.x's switches off write nothing
    lines = ["#!/bin/bash", headline(plan, hw), " ".join(launcher) + f" --module {module} \\"]
    lines += [f"    {f}" + (" \\" if i < len(flags) - 1 else "") for i, f in enumerate(flags)]
    return "\n".join(lines) + "\n"


def check(plan: Plan) -> None:
    """ValueError for what OpenRLHF cannot run as planned or writes no file for (its rules:
    planner/frameworks/openrlhf/__init__.py; a 0.9.x plan is read from users' scripts, never written: the 0.9 line's rule
    of scope "written")."""
    check_plan("openrlhf", plan)


def headline(plan: Plan, hw: Hardware) -> str:
    m = plan.memory
    where = f"{m.peak_term.split(': ')[0]}, " if m.peak_term and ": " in m.peak_term else ""
    return (
        f"# memplan plan for {f'openrlhf@{plan.release}' if plan.release else VERSION} ({plan.workload.kind.upper()}): {m.device_total_bytes / 2**30:.1f} of "
        f"{m.capacity_bytes / 2**30:.1f} GiB per GPU at its peak ({where}{m.peak_phase}), {hw.gpu.name}"
    )


def script(plan: Plan, model: ModelSpec, hw: Hardware) -> str:
    check(plan)
    flags = role_flags(plan, model, hw) + batch_flags(plan) + memory_flags(plan) + lora_flags(plan, model, at(plan))
    lines = [
        "#!/bin/bash",
        headline(plan, hw),
        "# model paths: the Hugging Face ids; give your local paths. Submit with `ray job submit -- bash openrlhf_ppo.sh`",
        f"python3 -m {ENTRY} \\",
    ]
    lines += [f"    {f}" + (" \\" if i < len(flags) - 1 else "") for i, f in enumerate(flags)]
    return "\n".join(lines) + "\n"


def hf(name: str) -> str:
    return catalog.hf_id(name) or name


def role_flags(plan: Plan, model: ModelSpec, hw: Hardware) -> list[str]:
    w, r, flag = plan.workload, plan.workload.roles.resolved("openrlhf"), at(plan)
    out = [
        flag("workload.kind", ESTIMATOR[w.kind]),
        flag("workload.beta", f"{w.beta:g}"),
        flag("model", hf(model.name)),
        flag("prompt_data", "YOUR_PROMPTS"),
        flag("output_dir", "./ckpt"),
    ]
    if w.kind == "grpo" and w.beta > 0:  # GRPO's KL as a loss, with the estimator OpenRLHF recommends for it (:720-727)
        out += [flag("kl_loss"), flag("kl_estimator", "k3")]
    if w.kind == "ppo":
        out.append(flag("critic_model", hf(r.critic_model or model.name)))
    out.append(flag("reward_model", hf(r.reward_model)) if r.reward_model else flag("reward_url", REWARD_URL))
    return out + placement_flags(plan, hw)


def placement_flags(plan: Plan, hw: Hardware) -> list[str]:
    r, flag = plan.workload.roles.resolved("openrlhf"), at(plan)
    world = hw.world_size
    if r.placement == "colocate":
        roles = ["actor", *(role for role in ("ref", "critic", "reward") if role in existing(plan))]
        out = [x for role in roles for x in gpus(flag, role, hw.nodes, hw.gpus_per_node)]
        return out + [
            flag("engines", world // r.rollout_tp),
            flag("rollout_tp", r.rollout_tp),
            flag("colocate_all"),
        ]
    out = []
    for g in r.groups():
        out += group_flags(plan, g, hw, r.rollout_tp)
    return out


def existing(plan: Plan) -> set[str]:
    w = plan.workload
    have = set(existing_roles(w.kind, w.roles))
    return have - ({"ref"} if w.beta == 0 else set())


def gpus(flag, role: str, nodes: int, per_node: int) -> list[str]:
    """A role's nodes and GPUs a node (keys.py's role rows)."""
    return [flag(f"{role}.num_nodes", nodes), flag(f"{role}.num_gpus_per_node", per_node)]


def group_flags(plan: Plan, g: Group, hw: Hardware, tp: int) -> list[str]:
    flag = at(plan)
    nodes, per_node = (g.gpus // hw.gpus_per_node, hw.gpus_per_node) if g.gpus > hw.gpus_per_node else (1, g.gpus)
    if g.roles == ("rollout",):
        return [flag("engines", g.gpus // tp), flag("rollout_tp", tp)]
    out = [x for role in g.roles for x in gpus(flag, role, nodes, per_node)]
    if set(g.roles) == {"actor", "ref"}:
        out.append(flag("colocate_actor_ref"))
    if set(g.roles) == {"critic", "reward"}:
        out.append(flag("colocate_critic_reward"))
    return out


def batch_flags(plan: Plan) -> list[str]:
    w, r, flag = plan.workload, plan.workload.roles.resolved("openrlhf"), at(plan)
    spg = w.steps_per_gen(plan.grad_accum)
    out = [
        flag("micro_batch", plan.micro_batch),
        flag("global_batch", plan.global_batch),
        flag("rollout_batch", plan.micro_batch * plan.data_parallel * spg // w.num_generations),
        flag("workload.num_generations", w.num_generations),
        flag("rollout_micro_batch", rollout_micro(plan)),
        flag("workload.num_iterations", w.num_iterations),
        *length_flags(plan),
    ]
    if r.max_tokens_per_gpu:  # token budgets (--train.dynamic_batch_enable packs the rows, :691-697)
        out += [flag("dynamic_batch"), flag("max_tokens_per_gpu", r.max_tokens_per_gpu)]
        out.append(flag("logprob_max_tokens_per_gpu", r.logprob_max_tokens_per_gpu or r.max_tokens_per_gpu))
    if r.remove_padding:
        out.append(flag("packing"))
    if r.entropy != "off":
        out.append(flag("entropy", "0.001"))
    return out


def length_flags(plan: Plan) -> list[str]:
    """The rows' lengths: --max_len (prompt + completion) and --max_new_tokens from 0.9.10; 0.8.x's train_ppo_ray
    takes the prompt's and the completion's (v0.8.9 cli/train_ppo_ray.py:320-322 --prompt_max_len, --generate_max_len;
    --max_len deprecated, their sum where unset, :44)."""
    w, flag = plan.workload, at(plan)
    if plan.release in ("0.5", "0.8"):
        return [f"--prompt_max_len {w.prompt_tokens()}", f"--generate_max_len {w.max_completion_length}"]
    return [flag("seq_len", w.seq_len()), flag("workload.max_completion_length", w.max_completion_length)]


def rollout_micro(plan: Plan) -> int:
    """The experience passes' rows (--rollout.micro_batch_size): the log-prob budget in whole rows where it is not a
    token budget, else the training micro-batch."""
    r, w = plan.workload.roles, plan.workload
    if r.logprob_max_tokens_per_gpu and not r.max_tokens_per_gpu:
        return max(1, r.logprob_max_tokens_per_gpu // w.seq_len())
    return plan.micro_batch


def memory_flags(plan: Plan) -> list[str]:
    r, flag = plan.workload.roles.resolved("openrlhf"), at(plan)
    out = [flag("zero_stage", plan.zero_stage), flag("precision", plan.precision)]
    out.append(flag("attention", KEYS["attention"].write(plan.attention)))
    if plan.checkpointing == "full":
        out.append(flag("checkpointing"))
    if plan.offload == "optimizer":
        out.append(flag("offload"))
    if {"actor-optimizer", "critic-optimizer"} & set(r.offload):
        out.append(flag("ds_sleep"))
    # dotted: --ref.offload / --reward.offload; the flat lines' one --ref_reward_offload for both (keys.py)
    out += dict.fromkeys(flag(f"{role}_offload") for role in ("ref", "reward") if role in r.offload)
    out.append(flag("rollout_memory", f"{r.rollout_memory:g}"))
    if r.sleep_level == 1:
        out.append(flag("vllm_sleep"))
    if r.rollout_eager:
        out.append(flag("rollout_eager"))
    return [f for f in out if f]  # 0.8.x's switches off write nothing


def lora_flags(plan: Plan, model: ModelSpec, flag) -> list[str]:
    """LoRA's rank and alpha; where the plan adapts other than all linear (OpenRLHF's default: 0.11.2
    cli/train_sft.py:260) its modules by name, space-separated (nargs="*"; all-linear itself is never written: a typed
    one reaches PEFT as a list it does not expand, planner.frameworks.openrlhf.reader_flags.lora_targets)."""
    if not plan.lora_rank:
        return []
    out = [flag("lora_rank", plan.lora_rank), flag("lora_alpha", 2 * plan.lora_rank)]
    if plan.lora_targets != "all-linear":
        have = {t.name for t in model.tensors if t.lora}
        names = [n for n in peft_target_modules(plan.lora_targets) or [] if n in have]
        out.append(flag("lora_targets", " ".join(names)))
    return out


def at(plan: Plan):
    """flag(name, value) at the plan's release line: field `name`'s flag (planner.frameworks.openrlhf.keys: dotted,
    or flat at 0.10.1 and before, each row's rename, every row having one), with `value` after it where given."""
    line = "0.8" if plan.release == "0.5" else plan.release  # the 0.5 line takes 0.8's flags

    def flag(name: str, value: object = None) -> str:
        if line == "0.8" and name in SWITCHES_08:
            return switch_08(name, value)
        return KEYS.flag(name, line) + ("" if value is None else f" {value}")

    return flag


# 0.8.x's switches (v0.8.9 cli/train_ppo_ray.py:275 --bf16, :282 --flash_attn, store_true): the value each turns on
SWITCHES_08 = {"precision": "bf16", "attention": "flash_attention_2"}


def switch_08(name: str, value: object) -> str:
    """`--bf16` / `--flash_attn` where the plan asks for bf16 / flash-attn, "" for eager (the switch off): the rules
    check() applies leave no other value (the framework's runs bf16 or fp16, the 0.8 line's refuses fp16 and sdpa)."""
    return KEYS.flag(name, "0.8") if value == SWITCHES_08[name] else ""
