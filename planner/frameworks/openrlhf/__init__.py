"""OpenRLHF 0.11.2's runs: RL (`python3 -m openrlhf.cli.train_ppo_ray` with its dotted flags, Ray placing the roles):
actor and critic trained by DeepSpeed ZeRO, reference and reward model by DeepSpeed's inference engine, vLLM engines
for the rollout; DPO and SFT (`deepspeed --module openrlhf.cli.train_dpo|train_sft`) as one trainer on the launcher's
GPUs (reader.py, reader_rollout.py, reader_sft.py). Files cited are in the 0.11.2 wheel (paths under openrlhf/).

Releases (github.com/OpenRLHF/OpenRLHF tags, openrlhf/cli/train_ppo_ray.py): flat flags through 0.10.1, dotted from
0.10.2 (the intake reads both: planner/frameworks/openrlhf/reader.py); 0.9.x's micro-batch default was 4 and its precision
`--bf16` (v0.9.0 :338, :275), 0.10.x's 1 and `--param_dtype` (v0.10.1 :388, :310); through 0.8.9 the attention was
the `--flash_attn` switch, off by default (eager: v0.8.9 :282, models/actor.py:58), from 0.8.10 `--attn_implementation`
flash_attention_2 by default (v0.8.10 :283-287)."""

from dataclasses import replace

from planner.frameworks.base import NO_SPLITS, Default, Framework, Release, Rule, kind, workload_of
from planner.frameworks.openrlhf.keys import BUCKETS, KEYS
from planner.frameworks.openrlhf.lmmr1 import lmm_r1
from planner.frameworks.openrlhf.lmmr1_dev import lmm_r1_dev
from planner.frameworks.openrlhf.mmeureka import mm_eureka
from planner.frameworks.openrlhf.mmeureka_internvl import mm_eureka_internvl
from planner.frameworks.openrlhf.openrlhfm import openrlhf_m
from planner.frameworks.rl import RoleEngine

# the groups --placement may give (cli/train_ppo_ray.py: each role alone, or actor+ref and critic+reward together)
GROUPS = ({"actor"}, {"actor", "ref"}, {"ref"}, {"critic"}, {"critic", "reward"}, {"reward"}, {"rollout"})


def _roles(k: dict):
    """The roles of a train_ppo_ray run with OpenRLHF's defaults filled in; None for DPO and SFT (cli/train_dpo.py,
    cli/train_sft.py: one trainer)."""
    w = workload_of(k)
    return None if w is None or w.kind in ("dpo", "sft") else w.roles.resolved("openrlhf")


def _pre(k: dict) -> bool:
    w = k.get("workload")
    return bool(w.get("precompute_ref_log_probs") if isinstance(w, dict) else getattr(w, "precompute_ref_log_probs", 0))


def _odd_group(k: dict) -> bool:
    r = _roles(k)
    return r is not None and r.placement != "colocate" and any(set(g.roles) not in GROUPS for g in r.groups())


CLI = "cli/train_ppo_ray.py"


def _one_of_two_offloaded(k: dict, w=None) -> bool:
    """The flat lines' --ref_reward_offload offloads the reference and the reward model together (v0.10.1 cli/
    train_ppo_ray.py:476, trainer/ray/launcher.py:113-120, :167-175): a plan offloading one while the other, present,
    stays resident has no flag there. The reference exists where KL is used (beta > 0), the reward model where named."""
    r, wl = _roles(k), workload_of(k)
    if r is None:
        return False
    present = {"ref"} if (wl.beta or 0) > 0 else set()
    present |= {"reward"} if r.reward_model else set()
    return bool({"ref", "reward"} & set(r.offload)) and not present <= set(r.offload)


def _unsaid_offload(k: dict) -> bool:
    """Role offloads no flag of OpenRLHF says: --ds.enable_sleep offloads the trained roles' optimizer states,
    gradients and fp32 master weights, the actor's and the critic's together, never their bf16 weights
    (offload_deepspeed_states: v0.11.0 utils/deepspeed/deepspeed_utils.py:151-188, lp_params left out at :178;
    trainer/ray/ppo_actor.py:580-581); the critic exists under GAE (ppo) alone."""
    r = _roles(k)
    if r is None:
        return False
    parts = set(r.offload)
    trained = {"actor-optimizer"} | ({"critic-optimizer"} if kind(k) == "ppo" else set())
    sleep = parts & {"actor-optimizer", "critic-optimizer"}  # what --ds.enable_sleep is written for
    return bool(parts & {"actor-params", "critic-params"}) or (bool(sleep) and not trained <= parts)


# the rule of both flat lines that write (0.8, 0.10): --ref.offload / --reward.offload came apart at 0.10.2
ONE_SWITCH = Rule(
    "offload",
    "OpenRLHF 0.10.1 and before offload the reference and the reward model together (--ref_reward_offload): give "
    "--role-offload ref,reward, neither, or --framework openrlhf",
    _one_of_two_offloaded,
    "written",
)


def _flat(line: str) -> dict[str, str]:
    """The flat flags of release line `line` (planner.frameworks.openrlhf.keys' renames)."""
    names = ("micro_batch", "global_batch", "zero_stage", "offload", "checkpointing", "attention", "lora_rank")
    return KEYS.release_keys(line, (*names, "model", "precision"))


_LINE_0_8 = Release(
    "0.8",
    (0, 5, 4),
    "openrlhf v0.8.9 openrlhf/cli/train_ppo_ray.py",
    defaults={
        "micro_batch": Default(4, f"v0.8.9 {CLI}:333 --micro_train_batch_size 4"),
        # the --flash_attn switch, off: the actor loads eager attention (v0.8.9 models/actor.py:58; train_dpo.py
        # :202 and train_sft.py take the same switch; v0.5.0 cli/train_ppo_ray.py:234 the same)
        "attention": Default("eager", f"v0.8.9 {CLI}:282 --flash_attn off: eager (models/actor.py:58)"),
        # the line's own argparse defaults where 0.11.2's differ (guard: tests/planner/frameworks/openrlhf/
        # test_line_defaults.py): --bf16 off is DeepSpeed's fp32 (train_dpo.py:195, train_sft.py:178 the same;
        # utils/deepspeed/deepspeed_utils.py:45-46 bf16.enabled), no --max_len: the prompt's and the
        # completion's own limits (:44 max_len = prompt_max_len + generate_max_len)
        "precision": Default("fp32", f"v0.8.9 {CLI}:275 --bf16 off: fp32 (utils/deepspeed/deepspeed_utils.py:45-46)"),
        "rollout_micro_batch": Default(8, f"v0.8.9 {CLI}:318 --micro_rollout_batch_size 8"),
        "workload.max_prompt_length": Default(1024, f"v0.8.9 {CLI}:320 --prompt_max_len 1024"),
        "workload.max_completion_length": Default(1024, f"v0.8.9 {CLI}:321 --generate_max_len 1024"),
    },
    keys=_flat("0.8"),
    notes=(),
    # both are store_true switches there (v0.8.9 cli/train_ppo_ray.py:275, :282; train_dpo.py:195, :202;
    # train_sft.py:178, :181): bf16 or fp32, flash-attn or eager; no flag asks for fp16 or sdpa
    rules=(
        Rule(
            "release",
            "OpenRLHF 0.8.x's --bf16 and --flash_attn are switches (bf16 or not, flash-attn or eager): its fp16 "
            "and sdpa plans are read, not written; give --precision bf16 and --attention flash or eager",
            lambda k, w: k.get("precision") == "fp16" or k.get("attention") == "sdpa",
            "written",
        ),
        ONE_SWITCH,
    ),
)
# v0.5.0 .. v0.5.3: the 0.8 line's flags and defaults (read at v0.5.0 above), and DeepSpeed's gradients accumulated
# in fp32: "grad_accum_dtype": grad_accum_dtype if grad_accum_dtype else "fp32" (v0.5.3 openrlhf/utils/deepspeed/
# deepspeed_utils.py:52; v0.2.0 .. v0.4.x utils/deepspeed_utils.py:56 the same), None from v0.5.4 (commit 47f7cd8f)
_LINE_0_5 = replace(
    _LINE_0_8,
    name="0.5",
    first=(0, 5),
    source="openrlhf v0.5.3 openrlhf/utils/deepspeed/deepspeed_utils.py",
    adapter={"zero_grad_accum": "fp32"},
    notes=(
        "0.5.0 .. 0.5.3: the 0.8 line's flat flags, and DeepSpeed's gradients accumulated in fp32 (grad_accum_dtype)",
    ),
)
RELEASES = (
    _LINE_0_5,
    replace(
        _LINE_0_8, notes=("0.5.4 .. 0.8.9: flat flags, --bf16, and --flash_attn (off by default: eager attention)",)
    ),
    Release(
        "0.9",
        (0, 8, 10),
        "openrlhf v0.9.0 openrlhf/cli/train_ppo_ray.py",
        defaults={"micro_batch": Default(4, f"v0.9.0 {CLI}:338 --micro_train_batch_size 4")},
        keys=_flat("0.9"),
        notes=(
            "0.8.10 .. 0.9.x: flat flags (--micro_train_batch_size, --zero_stage, --pretrain)",
            "--attn_implementation flash_attention_2 by default (v0.8.10 :283-287); --bf16 at 0.9.0, --param_dtype by 0.9.10",
        ),
        # users' 0.9.x scripts are read and planned; none is written: the line's flags changed inside it (--bf16 at
        # v0.9.0 cli/train_ppo_ray.py:275, --param_dtype by v0.9.10; --prompt_max_len / --generate_max_len at v0.9.0
        # :325-326, --max_len / --max_new_tokens by v0.9.10 :370), so no one script runs on every 0.9 release
        rules=(
            Rule(
                "release",
                "OpenRLHF 0.9.x scripts are read, not written: give --framework openrlhf@0.10 or openrlhf",
                lambda k, w: True,
                "written",
            ),
        ),
    ),
    Release(
        "0.10",
        (0, 10),
        "openrlhf v0.10.1 openrlhf/cli/train_ppo_ray.py",
        defaults={"micro_batch": Default(1, f"v0.10.1 {CLI}:388 --micro_train_batch_size 1")},
        keys=_flat("0.10"),
        notes=("flat flags (--micro_train_batch_size, --zero_stage, --param_dtype, --pretrain)",),
        rules=(ONE_SWITCH,),
    ),
    Release("0.10.2", (0, 10, 2), f"openrlhf v0.10.2 .. 0.11.2 {CLI} (dotted flags)"),
)
# what it runs (closed knobs: planner.frameworks.base.Framework.runs)
RUNS = {
    "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
    "lora_dropout_kept": (False,),
    "lora_ends": ("none",),  # --target_modules read for the linears alone (RL and DPO steps)
    "lora_tower_full": (False,),
    # its DeepSpeed config names Adam: DeepSpeed picks FusedAdam or DeepSpeedCPUAdam (deepspeed_utils.py:71)
    "client_optimizer": (False,),
    # its own DeepSpeed config (no user JSON read): "auto" sizes DeepSpeed fills with its defaults (the reading's,
    # reader_flags.zero_buckets); "" (HF's sizes) where memplan plans it without a reading
    "zero_buckets": ("", *BUCKETS),
    "device_map": ("off",),  # one process a GPU
    "dataparallel": (False,),  # torch's nn.DataParallel: HF's Trainer alone
    "num_labels": (1,),  # causal-lm only: the task's knobs at their defaults
    "negatives": (0,),
    "task": ("causal-lm",),  # train_rm: not planned yet
    "trained_layout": ("last",),  # LLaMA-Pro's interleaved blocks: not run here
    "trained_layers": (0,),  # freeze tuning (LLaMA-Factory's finetuning_type freeze): not run here
    # --algo.advantage.estimator (cli/train_ppo_ray.py:515); DPO: cli/train_dpo.py (policy and reference)
    "workload": ("ppo", "grpo", "rloo", "reinforce++", "dpo", "sft"),  # SFT: cli/train_sft.py
    "checkpointing": ("off", "full"),  # --actor.gradient_checkpointing_enable (:328)
    "loss": ("standard",),
    "attention": ("flash", "sdpa", "eager"),  # --ds.attn_implementation
    "batching": ("padded",),
    "fsdp": ("off",),  # DeepSpeed only
    "offload": ("none", "optimizer"),  # --ds.adam_offload (:341)
    "optimizer": ("adamw", "adamw-fused"),  # DeepSpeed's FusedAdam / CPUAdam
    "quant": ("none", "nf4"),  # --ds.load_in_4bit
    "optimizer_in_backward": (False,),
    "expert_parallel": ("off",),
    "frozen": ("none",),
    "lora_vision": (False,),
    "lora_variant": ("lora",),  # its LoRA config has no use_dora: DoRA is not run
    **NO_SPLITS,
}
# train_ppo_ray's roles
ROLES = RoleEngine(
    # cli/train_ppo_ray.py:251-255 --vllm.gpu_memory_utilization 0.95, :244-249 --vllm.enable_sleep off (the engines
    # then never sleep), :375 --ds.packing_samples off (padded rows)
    defaults={"rollout_memory": 0.95, "sleep_level": 0, "remove_padding": False},
    sleep_on=1,  # --vllm.enable_sleep sleeps at level 1 (vllm_engine.py:136-137)
    # passes neither max_num_batched_tokens nor max_num_seqs: vLLM 0.29's engine defaults (engine/arg_utils.py:2887-2902)
    profile=(2048, 128),
    # the Actor casts the whole logits to fp32 for its log-probs (models/actor.py:267, models/utils.py:172-196)
    upcasts_logprobs=True,
)

FRAMEWORK = Framework(
    name="openrlhf",
    launched=(
        "openrlhf.cli.train_ppo_ray",
        "openrlhf.cli.train_dpo",
        "openrlhf.cli.train_sft",
        "openrlhf.cli.train_ppo",
    ),
    package="openrlhf",  # its pinned version decides the release (planner.intake.releases)
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    label="OpenRLHF (Ray PPO/GRPO, DPO, SFT)",
    # its ring attention (--ring_attn_size) splits a role's rows: not planned yet
    grpo_sp_why="its roles split over ranks (--ring_attn_size) are not planned yet",
    role_engine=ROLES,
    # train_sft's and train_dpo's collators pad a micro-batch to its longest row, so --max_len is a cap (PPO's rows are
    # the rollout's: not a capped length)
    pads_per_batch=(
        "OpenRLHF pads each micro-batch to its longest row: v0.11.0 openrlhf/datasets/sft_dataset.py:215-227 and "
        "reward_dataset.py:179-199 (zero_pad_sequences, utils/utils.py:93-104: to the batch's longest); v0.8.9 "
        "sft_dataset.py:216-229, v0.5.0 sft_dataset.py:136-150 alike"
    ),
    version="openrlhf 0.11.2",
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "optimizer_rank",  # GaLore's and APOLLO's, inert under the optimizers it runs
        "optimizer_targets",
        "optimizer_projection",
        "precision",
        "zero_stage",
        "lora_rank",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_dropout",
        "lora_base_fp32",
        "vit_checkpointing",
        "cp_attention",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs=RUNS,
    defaults={
        "zero_stage": Default(2, f"{CLI}:327 --ds.zero_stage 2"),
        "micro_batch": Default(1, f"{CLI}:412 --train.micro_batch_size 1"),
        "global_batch": Default(128, f"{CLI}:413 --train.batch_size 128"),
        "checkpointing": Default("off", f"{CLI}:328 --actor.gradient_checkpointing_enable off"),
        "precision": Default("bf16", f"{CLI} --ds.param_dtype bf16"),
    },
    keys=KEYS.shown("micro_batch global_batch zero_stage offload checkpointing precision attention lora_rank model"),
    notes=(
        (
            "RL only (PPO, GRPO as group_norm, RLOO, REINFORCE++): DeepSpeed ZeRO roles on Ray, vLLM engines, per-role "
            "GPU counts or --train.colocate_all"
        ),
    ),
    releases=(
        *RELEASES,
        mm_eureka(_flat("0.8"), _LINE_0_8.rules, RUNS),
        mm_eureka_internvl(_flat("0.8"), _LINE_0_8.rules, RUNS),
        lmm_r1(_flat("0.8"), _LINE_0_8.rules, RUNS),
        lmm_r1_dev(_flat("0.8"), _LINE_0_8.rules, RUNS),
        openrlhf_m(_flat("0.8"), _LINE_0_8.rules, RUNS),
    ),
    rules=(
        Rule(
            "precision",
            "runs DeepSpeed's bf16 or fp16 (--ds.param_dtype): give --precision bf16 or fp16",
            lambda k: k["precision"] not in ("bf16", "fp16"),
        ),
        Rule(
            "precompute_ref_log_probs",
            "train_dpo keeps its reference model (cli/train_dpo.py): no precompute_ref_log_probs",
            lambda k: kind(k) == "dpo" and _pre(k),
        ),
        Rule(
            "sleep_level",
            "its vLLM engines sleep at level 1 (vllm_engine.py:136-137): give --sleep-level 1 or 0",
            lambda k: (r := _roles(k)) is not None and r.sleep_level == 2,
        ),
        Rule(
            "sleep_level",
            "sleeps its engines only under --train.colocate_all: --sleep-level 1 needs --placement colocate",
            lambda k: (r := _roles(k)) is not None and r.sleep_level == 1 and r.placement != "colocate",
        ),
        Rule(
            "offload",
            "offloads the actor's and the critic's optimizer states together (--ds.enable_sleep), their weights never: "
            "give --role-offload actor-optimizer,critic-optimizer (critic-optimizer under ppo), ref, reward",
            _unsaid_offload,
        ),
        Rule(
            "placement",
            "places each role alone, or actor+ref and critic+reward together (cli/train_ppo_ray.py)",
            _odd_group,
        ),
        Rule(
            "rollout_engine",
            "generates with vLLM, or with the actor's own HF generate (hf): give --rollout-engine vllm",
            lambda k: (r := _roles(k)) is not None and r.rollout_engine == "sglang",
        ),
        Rule(
            "rollout_engine",
            "memplan writes train_ppo_ray with vLLM engines; HF generate in every process (the pre-Ray "
            "openrlhf.cli.train_ppo of v0.6.1 and before) is read, not written: give --rollout-engine vllm",
            lambda k, w: (r := _roles(k)) is not None and r.rollout_engine == "hf",
            scope="written",
        ),
    ),
)
