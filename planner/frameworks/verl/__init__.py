"""verl 0.9.1's SFT trainer (`torchrun -m verl.trainer.sft_trainer key=value ...`, Hydra config
sft_trainer_engine.yaml; 0.9.1 has no fsdp_sft_trainer any more): its FSDP engine only (FSDP1 or FSDP2, no DeepSpeed,
no DDP), Ulysses sequence parallel, LoRA, full checkpointing on by default; SFT only (RL through main_ppo: issue 35).
Files cited are in the 0.9.1 wheel (paths under verl/)."""

from dataclasses import replace

from planner.frameworks.base import Default, Framework, Release, Rule, kind, only_expert_targets, workload_of
from planner.frameworks.rl import RoleEngine
from planner.frameworks.tool import Signs
from planner.frameworks.verl.keys import SPANS

# verl/models/transformers/monkey_patch.py:544-552: remove-padding and Ulysses replace flash attention's forward
ULYSSES_FLASH = "monkey_patch.py:544-552 patches flash attention's forward"


def _heads_refuse(k: dict, w) -> bool:
    """monkey_patch.py:343-349, verl's own assertion at model build: the heads divide by the Ulysses size, the KV
    heads divide by it or divide it."""
    sp, t = k["sequence_parallel"], getattr(w.model, "text", None)
    return sp > 1 and t is not None and bool(t.heads % sp or (t.kv_heads % sp and sp % t.kv_heads))


def _roles(k: dict):
    """The roles of an RL run (verl plans GRPO by roles too: ROLES), else None."""
    w = workload_of(k)
    return w.roles if w is not None and (w.role_run or w.kind == "grpo") else None


# main_ppo's roles (verl 0.9.1, paths under verl/)
ROLES = RoleEngine(
    # trainer/config/rollout/rollout.yaml:46 gpu_memory_utilization 0.5, vllm_async_server.py:1289-1305 sleep level 2
    # in the hybrid engine; model.use_remove_padding true (model/hf_model.yaml:40); the v1 trainer sizes the critic's
    # micro-batches by ppo_infer_max_token_len_per_gpu, 32,768 tokens, whatever the critic's micro-batch keys say
    # (trainer/ppo/v1/trainer_base.py:267-268, workers/config/critic.py:89)
    defaults={"rollout_memory": 0.5, "sleep_level": 2, "critic_max_tokens_per_gpu": 32768, "remove_padding": True},
    # the reference model's parameters on the host, streamed unit by unit (FSDP1 CPUOffload, FSDP2 CPUOffloadPolicy:
    # workers/engine/fsdp/transformer_impl.py:429-435, 459-463)
    offloads=("ref",),
    sleep_on=2,  # the hybrid engine's level (vllm_async_server.py:1289-1317)
    profile=(8192, 256),  # max_num_batched_tokens, max_num_seqs (rollout/rollout.yaml:78,84)
    # dp_actor.py _forward_micro_batch: the compute dtype's logits; compute_log_prob computes the entropy always
    logprob_entropy=True,
    # rollout.log_prob_micro_batch_size_per_gpu, ref.log_prob_micro_batch_size_per_gpu (v0.7.0 workers/fsdp_workers.py
    # :1014, :1054), ref.log_prob_max_token_len_per_gpu (ref/ref.yaml:24; dp_actor.py:366-368)
    own_pass_sizes=True,
    # model.use_fused_kernels (model/hf_model.yaml:61, impl_backend torch :67): FusedLinearForPPO scores 512 tokens at
    # a time (utils/experimental/torch_functional.py FusedLinearForPPO(chunk_size=512)); a chunk of a no-grad pass
    # holds 4 fp32 logits-sized tensors at v0.5.0-v0.7.0 (the fp32 logits, softmax, log_softmax, logsumexp's or
    # p x logits' temporary: the same file at each tag) and 3 in the 0.9.1 wheel (log_softmax or flash-attn's
    # cross-entropy after the entropy); the line's 4, one chunk's fp32 logits over at 0.9.1
    # (probes/verl_fused_head.py, tests/probes/test_verl_fused_head.py)
    fused_chunk_tokens=512,
    fused_logprob_fp32_copies=4,
    reward_engine=True,  # a vLLM/SGLang server (experimental/reward_loop/reward_model.py:51-93)
    # reward.reward_model.rollout.gpu_memory_utilization 0.5 (trainer/config/reward/reward.yaml:41-48, eager)
    reward_memory=0.5,
    critic_own_budget=True,  # trainer/ppo/v1/trainer_base.py:267-268
    sync_bytes_per_param=4,  # fp32 weights (engine/fsdp.yaml:33 model_dtype), not cast before sending
    # rollout.checkpoint_engine.update_weights_bucket_megabytes 2048 (trainer/config/rollout/rollout.yaml:282,296),
    # a GPU buffer on each trainer rank shared with the engine over CUDA IPC
    # (vllm_rollout/bucketed_weight_transfer.py:179-185)
    sync_bucket_bytes=2048 << 20,
    # rollout.n 1 runs: a group of one takes mean 0 and std 1, its advantage the raw score (trainer/ppo/core_algos.py
    # :312-314 at v0.7.0, :315-317 in the 0.9.1 wheel); nothing in main_ppo asks for 2 or more
    one_sample_groups=True,
)

# the release lines of main_ppo's defaults that moved (the mirror's tags, trainer/config/): rows padded in the actor's
# and the reference's forward through 0.6.1, the rollout without CUDA graphs through 0.5.0
PADDED = {"role_engine": replace(ROLES, defaults={**ROLES.defaults, "remove_padding": False})}
# the workloads main_ppo runs (writer_rl.py); every other is verl.trainer.sft_trainer's (writer.py)
RL_KINDS = ("grpo", "ppo", "rloo", "reinforce++")
RELEASES = (
    Release(
        "0.5",
        (0, 2),
        "verl v0.2.0 .. v0.5.0 verl/trainer/config/ppo_trainer.yaml",
        defaults={
            "remove_padding": Default(
                False, "verl v0.5.0 trainer/config/ppo_trainer.yaml:68: use_remove_padding: false"
            ),
            "rollout_eager": Default(True, "verl v0.5.0 trainer/config/rollout/rollout.yaml:35: enforce_eager: True"),
        },
        adapter=PADDED,
        # users' scripts of the line are read and planned; none is written (writer.py, writer_rl.py write FSDP2 and
        # entropy_checkpointing), so the search ranks no plan at this line
        rules=(
            Rule(
                "release",
                "verl 0.2.x-0.3.x have no FSDP2 (strategy fsdp only: v0.3.0.post1 verl/trainer/config/ppo_trainer.yaml) "
                "and 0.4.0 no entropy_checkpointing (from v0.4.1): its scripts are read, not written; give --framework "
                "verl@0.6 or verl",
                lambda k, w: True,
                scope="written",
            ),
        ),
    ),
    Release(
        "0.6",
        (0, 6),
        "verl v0.6.0 .. v0.6.1 verl/trainer/config/ (model/hf_model.yaml, rollout/rollout.yaml:38 enforce_eager False)",
        defaults={
            "remove_padding": Default(
                False, "verl v0.6.0 trainer/config/model/hf_model.yaml:40: use_remove_padding: False"
            )
        },
        adapter=PADDED,
        # its RL scripts are written (each key checked in v0.6.0's config), and its SFT scripts without the keys
        # v0.6.0's sft_trainer_engine.yaml lacks (writer.py SFT_LEFT_OUT): optim.optimizer_impl, optim.optimizer and
        # override_optimizer_config came in v0.6.1 (optim/fsdp.yaml:5,9,50); v0.6.0 builds torch's AdamW alone
        # (verl/workers/engine/fsdp/transformer_impl.py:355-364), so the line writes no other optimizer
        rules=(
            Rule(
                "optimizer",
                "verl 0.6.0's SFT trainer builds torch's AdamW alone (workers/engine/fsdp/transformer_impl.py:355-364; "
                "optim.optimizer_impl from v0.6.1): give --optimizer adamw or --framework verl",
                lambda k, w: kind(k) not in RL_KINDS and k.get("optimizer", "adamw") != "adamw",
                scope="written",
            ),
            # 0.6.x's reward model is an FSDP forward under reward_model.* (v0.6.1 trainer/config/reward_model/
            # dp_reward_model.yaml), not 0.7's vLLM-served reward.reward_model with its own rollout memory share
            Rule(
                "release",
                "verl 0.6.x's reward model is an FSDP forward (reward_model.*), not a vLLM server with its own memory "
                "share (reward.reward_model, from 0.7): its PPO scripts with a reward model are read, not written; "
                "give --framework verl",
                lambda k, w: (wl := workload_of(k)) is not None and bool(wl.roles.reward_model),
                scope="written",
            ),
        ),
    ),
    Release("0.7", (0, 7), "verl v0.7.0 (model/hf_model.yaml:40 use_remove_padding: True) .. 0.9.1"),
)

# verl's multi-turn tool and interaction configs (examples/sglang_multiturn/config/tool_config/*.yaml: `tools:` of
# class_name entries; interaction_config/*.yaml: `interaction:`), which a trainer config names
# (actor_rollout_ref.rollout.multi_turn.tool_config_path / interaction_config_path)
MULTITURN = "verl's multi-turn tool or interaction config, which a trainer config names (multi_turn.tool_config_path)"


def _multiturn(k: set[str], d: dict) -> bool:
    entries = [e for key in ("tools", "interaction") if isinstance(d.get(key), list) for e in d[key]]
    return (
        k <= {"tools", "interaction"}
        and bool(entries)
        and all(isinstance(e, dict) and "class_name" in e for e in entries)
    )


FRAMEWORK = Framework(
    name="verl",
    # a trainer config over ppo_trainer.yaml read alone (reader.read_file); its tool configs known and refused
    signs=(
        Signs("verl", lambda k, d: "actor_rollout_ref" in k, 45),
        Signs("verl-multiturn", _multiturn, 46, refused=f"{MULTITURN}, not a training configuration: pass that one"),
    ),
    reads=("verl",),
    # main_ppo (reader.py), and the SFT trainers a launch script starts under torchrun (reader_sft.py)
    launched=("verl.trainer.main_ppo", "verl.trainer.fsdp_sft_trainer", "verl.trainer.sft_trainer"),
    # its modules that train nothing (b178a3cd5 verl/trainer/main_generation.py, main_generation_server.py, main_eval.py)
    idle_modules=(
        ("verl.trainer.main_generation", "generation (a dataset's responses)"),
        ("verl.trainer.main_generation_server", "generation (a dataset's responses, through a server)"),
        ("verl.trainer.main_eval", "evaluation of generated responses"),
    ),
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    label="verl sft_trainer and main_ppo",
    # its actor's Ulysses (actor_rollout_ref.actor.ulysses_sequence_parallel_size): the actor's update and the old and
    # reference log-prob passes run on 1/S of each packed micro-batch's tokens, S ranks sharing its rows; the rollout
    # engine's layout is its own (planner.estimate.roles.pass_tokens; verl 0.9.1 read with a helper)
    grpo_sp=(
        "workers/engine/fsdp/transformer_impl.py:651-652 (data-parallel size world / S), 1228-1242 (ids, positions and "
        "labels sliced), workers/engine/utils.py:104-111 (the token budget x S), ref/dp_ref.yaml:39"
    ),
    role_engine=ROLES,
    version="verl 0.9.1",
    package="verl",  # its pinned version decides the release (planner.intake.releases)
    releases=RELEASES,
    key_spans={"ppo": SPANS},  # main_ppo's keys only the 0.7 line takes (keys.SPANS); others: each line planned
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "precision",
        "optimizer_rank",  # GaLore's and APOLLO's, inert under the optimizers it runs
        "optimizer_targets",
        "optimizer_projection",
        "lora_rank",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_dropout",
        "lora_base_fp32",
        "sequence_parallel",
        "cp_attention",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
        "lora_dropout_kept": (False,),
        "lora_ends": ("none",),  # its actor_rollout_ref.model.target_modules: not read for the ends (RL steps)
        "lora_tower_full": (False,),
        "client_optimizer": (False,),  # FSDP or Megatron, no DeepSpeed
        "zero_buckets": ("",),  # no DeepSpeed
        "device_map": ("off",),  # one process a GPU
        "dataparallel": (False,),  # torch's nn.DataParallel: HF's Trainer alone
        "num_labels": (1,),  # causal-lm only: the task's knobs at their defaults
        "negatives": (0,),
        "task": ("causal-lm",),  # its critic is planned by roles (planner.estimate.roles), not as a task
        "trained_layout": ("last",),  # LLaMA-Pro's interleaved blocks: not run here
        "trained_layers": (0,),  # freeze tuning (LLaMA-Factory's finetuning_type freeze): not run here
        "workload": ("sft", "ppo", "grpo", "rloo", "reinforce++"),  # sft_trainer.py; RL: trainer/main_ppo.py
        "checkpointing": ("off", "full"),  # model.enable_gradient_checkpointing (config/model/hf_model.yaml:34)
        "loss": ("standard",),  # workers/utils/losses.py sft_loss over the model's logits
        "attention": ("flash", "sdpa"),  # model.override_config.attn_implementation (workers/config/model.py:185)
        "batching": ("padded",),  # rows of data.max_length; use_remove_padding drops the pads, never packs rows
        "zero_stage": (0,),  # the SFT engine is FSDP only (workers/config/engine.py:304-306: fsdp, fsdp2, fsdp_turbo)
        "offload": ("none", "optimizer+params"),  # engine.offload_policy, FSDP2's CPUOffloadPolicy (fsdp.yaml:18-19)
        "fsdp": (
            "full",
            "grad-op",
            "hybrid",
        ),  # reshard_after_forward (fsdp.yaml:21-23), fsdp_size (fsdp/utils.py:35-53)
        "optimizer": ("adamw", "adamw-fused", "adamw-8bit"),  # optim.optimizer / optimizer_impl (optimizer.py:298-345)
        "quant": ("none",),  # from_pretrained without a quantization config (engine/fsdp/transformer_impl.py:276-281)
        "optimizer_in_backward": (False,),
        "expert_parallel": ("off",),
        "frozen": ("none",),
        "lora_vision": (False,),
        "lora_variant": ("lora",),  # its LoRA config has no use_dora: DoRA is not run
        "vit_checkpointing": ("on",),  # HF's gradient_checkpointing_enable reaches the tower
        "tensor_parallel": ("off",),  # TP runs on verl's Megatron engine only, not its FSDP path
        "context_parallel": ("off",),  # likewise (megatron context_parallel_size)
    },
    defaults={
        "checkpointing": Default(
            "full", "verl/trainer/config/model/hf_model.yaml:34: enable_gradient_checkpointing True"
        ),
        "micro_batch": Default(4, "verl/trainer/config/sft_trainer_engine.yaml:18: data.micro_batch_size_per_gpu 4"),
        "global_batch": Default(256, "verl/trainer/config/sft_trainer_engine.yaml:17: data.train_batch_size 256"),
        "seq_len": Default(1024, "verl/trainer/config/sft_trainer_engine.yaml:32: data.max_length 1024"),
        "batching": Default(
            "token budget", "verl/trainer/config/sft_trainer_engine.yaml:19-20: use_dynamic_bsz True, 8192 tokens"
        ),
        "attention": Default("flash", "verl/workers/config/model.py:185: attn_implementation flash_attention_2"),
        "fsdp": Default("full", "verl/trainer/config/engine/fsdp.yaml:23,79: strategy fsdp, reshard_after_forward"),
        "precision": Default(
            "bf16", "verl/trainer/config/engine/fsdp.yaml:33: model_dtype fp32; transformer_impl.py:397-398: bf16/fp32"
        ),
        "optimizer": Default("adamw", "verl/trainer/config/optim/fsdp.yaml:5,9: torch.optim AdamW (foreach)"),
        "lora_rank": Default(0, "verl/trainer/config/model/hf_model.yaml:43: lora_rank 0"),
        "lora_targets": Default("all-linear", "verl/trainer/config/model/hf_model.yaml:49"),
        "sequence_parallel": Default(1, "verl/trainer/config/engine/fsdp.yaml:45: ulysses_sequence_parallel_size 1"),
    },
    keys={
        "micro_batch": "data.micro_batch_size_per_gpu",
        "global_batch": "data.train_batch_size",
        "seq_len": "data.max_length",
        "checkpointing": "model.enable_gradient_checkpointing",
        "fsdp": "engine.strategy / engine.reshard_after_forward / engine.fsdp_size",
        "offload": "engine.offload_policy",
        "optimizer": "optim.optimizer",
        "attention": "model.override_config.attn_implementation",
        "precision": "engine.model_dtype / engine.mixed_precision",
        "lora_rank": "model.lora_rank",
        "lora_targets": "model.target_modules",
        "sequence_parallel": "engine.ulysses_sequence_parallel_size",
        "model": "model.path",
    },
    notes=(
        (
            "SFT through its FSDP engine: Ulysses sequence parallel, no DeepSpeed, no TP/CP; checkpointing on and a token "
            "budget by default (the export sets a fixed micro-batch)"
        ),
    ),
    rules=(
        Rule(
            "sequence_parallel",
            f"Ulysses needs use_remove_padding, which needs flash attention (engine/fsdp/transformer_impl.py:148-152; "
            f"{ULYSSES_FLASH}): give --attention flash",
            lambda k: k["sequence_parallel"] > 1 and k["attention"] != "flash",
        ),
        Rule(
            "sequence_parallel",
            "Ulysses slices the packed rows, so its RL roles need model.use_remove_padding true "
            "(engine/fsdp/transformer_impl.py:148-152, workers/config/actor.py:331-341)",
            lambda k: (
                k["sequence_parallel"] > 1 and (r := _roles(k)) is not None and not r.resolved("verl").remove_padding
            ),
        ),
        Rule(
            "precision",
            "runs FSDP's bf16 mixed precision over fp32 weights (engine/fsdp/transformer_impl.py:390-401; the fp16 "
            "policy needs engine.mixed_precision, not exported): give --precision bf16",
            lambda k: k["precision"] != "bf16",
        ),
        Rule(
            "lora_targets",
            "model.target_modules names modules, not stacked experts: name a module too",
            only_expert_targets,
        ),
        Rule(
            "placement",
            "runs its roles on one GPU pool (the hybrid engine; only the reward model may have its own, "
            "reward.reward_model.enable_resource_pool): use --placement colocate",
            lambda k: (r := _roles(k)) is not None and r.placement != "colocate",
        ),
        # every other part of --role-offload has its key, written and read (keys.py; the reference's always on the
        # host: ROLES.offloads); the reward model's has none: 0.7 on serves it from vLLM, which frees its own memory
        # (0.9.1 trainer/config/reward/reward.yaml:27,38,45 reward_model.rollout.free_cache_engine), and 0.6's FSDP
        # reward model is not written (the 0.6 line's rule)
        Rule(
            "offload",
            "has no key to offload the reward model (a vLLM server from 0.7, reward/reward.yaml:38-45, that frees its "
            "own memory): leave reward out of --role-offload",
            lambda k: (r := _roles(k)) is not None and "reward" in r.offload,
        ),
        Rule(
            "sleep_level",
            "the hybrid engine sleeps at level 2 (vllm_async_server.py:1289-1305; level 1 only for LoRA adapters), "
            "or never (free_cache_engine false: --sleep-level 0)",
            lambda k: (r := _roles(k)) is not None and r.sleep_level == 1,
        ),
        Rule(
            "sequence_parallel",
            lambda k, w: (
                f"--sequence-parallel {k['sequence_parallel']} needs the {w.model.text.heads} attention heads "
                f"to divide by it and the {w.model.text.kv_heads} KV heads to divide by it or divide it "
                "(models/transformers/monkey_patch.py:343-349)"
            ),
            _heads_refuse,
            scope="layout",
        ),
    ),
    # engine/fsdp/transformer_impl.py:397-398: MixedPrecision(param_dtype=bf16, reduce_dtype=fp32) by default
    fsdp_reduce="fp32",
    # engine/fsdp.yaml:61 use_no_sync_for_gradient_accumulation false: a reduce-scatter every micro-batch
    # (workers/engine/fsdp/transformer_impl.py:702-708), sharded gradients between them
    fsdp_no_sync=False,
)
