"""ms-swift 4.6.0 (`swift sft|rlhf`): LoRA by default, full-layer checkpointing on by default, the ViT and aligner
frozen, Liger's fused loss, packing, ZeRO presets and FSDP2; SFT, DPO, GRPO, GKD, and PPO read (reader_ppo.py). Files
cited are in the 4.6.0 wheel.

Its release lines (github.com/modelscope/ms-swift tags: 2, 3, 3.4, 3.7, 3.9, 4), what moved between them and what memplan
writes at each: releases.py."""

from planner.frameworks.base import (
    Default,
    Framework,
    Rule,
    autotp_rule,
    full_dpo_precomputed,
    only_expert_targets,
    peft_fp8_quant,
    transformers_5_quant,
)
from planner.frameworks.rl import RoleEngine
from planner.frameworks.rules import (
    VLM_LORA_ENDS,
    hf_ppo_rules,
    kind,
    stacked_experts_prequant,
    torchao_line_rules,
    workload_of,
)
from planner.frameworks.runs import TORCH_OPTIMIZERS, TRANSFORMERS_ONE_STATE, TRANSFORMERS_TORCHAO
from planner.frameworks.swift.keys import KEYS
from planner.frameworks.swift.releases import HALF_LOSS, KTO_NO_SP, RELEASES
from planner.frameworks.tool import Signs, Tool
from planner.frameworks.trl.releases import TRL_DISABLE_DROPOUT, TRL_ZEROES_DROPOUT

# ms-swift loads Qwen2.5-Omni whole (Qwen2_5OmniForConditionalGeneration, 4.5.2 swift/model/models/qwen.py:1582-1591:
# its modules under thinker.*, the talker and fp32 token2wav beside it unless ENABLE_AUDIO_OUTPUT=0): its reading plans
# the whole checkpoint or the thinker by that variable (reader_env.omni_talker), which a written file cannot carry, so
# memplan writes no ms-swift plan for an Omni; a user's own script is still read
OMNI_WHOLE = Rule(
    "framework",
    "ms-swift loads Qwen2.5-Omni whole (swift/model/models/qwen.py:1582-1591: thinker, talker and token2wav, or the "
    "thinker under ENABLE_AUDIO_OUTPUT=0), which memplan writes no file for: give --framework llamafactory (which "
    "keeps the thinker, loader.py:173-174)",
    lambda k, w: w is not None and any(t.role == "audio" for t in getattr(w.model, "tensors", ())),  # an audio tower
    "written",
)

# keys of an ms-swift argument file that, beside `model` (or an ENV section), tell it from the other formats
SIGN_KEYS = {"tuner_type", "train_type", "rlhf_type", "target_modules", "torch_dtype", "attn_impl", "freeze_vit"}
# a Megatron-SWIFT configuration (`megatron sft|pt|rlhf --config X.yaml`): its batch keys (micro_batch_size and
# global_batch_size, v4.5.2 swift/megatron/arguments/megatron_args.py:483-484) beside `model` and one of these:
# Megatron-Core's own schedule and parallel keys, or an ms-swift key (examples/yaml/megatron/sft.yaml,
# examples/ray/grpo/ray_grpo_colocate.yaml); LLaMA-Factory's v1 schema (its own sign, rank 50) shares micro_batch_size
# but names model_class, dist_config or train_dataset
MEGATRON_KEYS = {
    "lr_warmup_fraction",
    "min_lr",
    "recompute_granularity",
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "expert_model_parallel_size",
    "cross_entropy_loss_fusion",
    "attention_backend",
    "no_save_optim",
    "colocate_groups",
    "dataset",
    "rlhf_type",
    "tuner_type",
    "ENV",
}
MEGATRON = (
    "a Megatron-SWIFT configuration (ms-swift's Megatron-Core trainer, `megatron sft|pt|rlhf --config`) is not read"
)
# swift's other subcommands, which train nothing (v4.5.2 swift/cli/main.py:14-27 ROUTE_MAPPING)
IDLE = (
    ("infer", "inference"),
    ("deploy", "an inference server"),
    ("rollout", "a rollout server (vLLM) for a GRPO run started apart"),
    ("export", "an export (merge, quantisation, conversion or a cached dataset)"),
    ("merge-lora", "a LoRA merge"),
    ("sample", "sampling"),
    ("eval", "evaluation"),
    ("app", "a chat app"),
    ("web-ui", "a web UI"),
)
# `swift sample`'s own keys (v4.5.2 swift/arguments/sampling_args.py:59-69): generation, no training
SAMPLE_KEYS = {"sampler_type", "sampler_engine", "orm_model", "prm_model", "num_return_sequences"}
SAMPLE = (
    "ms-swift's `swift sample` arguments (sampler_engine, num_return_sequences: swift/arguments/sampling_args.py:59-69) "
    "generate rows, not train: not planned"
)


def _split_steps(k: dict, w) -> bool:
    """A GRPO split under sequence parallel S whose accumulation or steps per generation is not S micro-steps each."""
    sp, work = k["sequence_parallel"], workload_of(k)
    if kind(k) != "grpo" or sp < 2 or work is None:
        return False
    return bool(w.grad_accum % sp or work.steps_per_gen(w.grad_accum) % sp)


def _megatron(keys: set[str], data: dict) -> bool:
    """Megatron-SWIFT's batch keys with one of MEGATRON_KEYS, not LLaMA-Factory v1's."""
    v1 = {"model_class", "dist_config", "train_dataset"}
    return {"micro_batch_size", "model"} <= keys and bool(keys & MEGATRON_KEYS) and not keys & v1


# --lora-tower-full is --tuner_type lora_llm, a tuner plugin from v4.0.0 (swift/tuner_plugin/lora_llm.py; no 3.x tag
# names it), whose LoraConfig takes the language model's linears and no dropout (reader_tuners.LORA_LLM); 3.x runs the
# same tuner from an --external_plugins file (swift/plugin/tuner.py extra_tuners from v3.0.3; v3.12.6's
# examples/train/multimodal/lora_llm_full_vit/custom_plugin.py, read by reader_plugin), which memplan reads but does not
# write; 2.x has no plugin tuners
LORA_LLM_RULES = (
    Rule(
        "lora_tower_full",
        "--lora-tower-full is --tuner_type lora_llm, from ms-swift v4.0.0 (swift/tuner_plugin/lora_llm.py; 3.x runs it "
        "from an --external_plugins tuner, which memplan reads but does not write): give --framework swift@4",
        lambda k, w: bool(k.get("lora_tower_full")) and k.get("release", "") not in ("", "4"),
        "written",
    ),
    Rule(
        "lora_tower_full",
        "--lora-tower-full is --tuner_type lora_llm, from ms-swift v4.0.0 (3.x from an --external_plugins tuner): "
        "ms-swift 2.x has no plugin tuners: give --framework swift@4",
        lambda k: bool(k.get("lora_tower_full")) and k.get("release", "") == "2",
    ),
    Rule(
        "lora_tower_full",
        "--lora-tower-full is --tuner_type lora_llm, whose LoraConfig takes the language model's linears and sets no "
        "dropout (swift/tuner_plugin/lora_llm.py:72-81): with --lora-targets all-linear and --lora-dropout 0",
        lambda k: (
            bool(k.get("lora_tower_full"))
            and (k.get("lora_targets", "all-linear") != "all-linear" or bool(k.get("lora_dropout")))
        ),
    ),
)
# --optimizer muonclip is swift/optimizers/muonclip.py from v4.0.0 (no 3.x tag has it); its max-logit tracker copies
# each layer's attention scores to fp32 under eager attention (muonclip.py:53-84, 71), which memplan does not plan
MUONCLIP_RULES = (
    Rule(
        "optimizer",
        "--optimizer muonclip is ms-swift's MuonClip, from v4.0.0 (swift/optimizers/muonclip.py): give "
        "--framework swift@4",
        lambda k: k.get("optimizer") == "muonclip" and k.get("release", "") not in ("", "4"),
    ),
    Rule(
        "optimizer",
        "--optimizer muonclip under eager attention: its max-logit tracker copies each layer's attention scores to "
        "fp32 (swift/optimizers/muonclip.py:53-84), which memplan does not plan; use --attention sdpa or flash",
        lambda k: k.get("optimizer") == "muonclip" and k.get("attention") == "eager",
    ),
)
FRAMEWORK = Framework(
    low_rank_order="targets-first",  # its GaLore / APOLLO step order (planner.frameworks.memory.Memory)
    muon_newton_schulz="compiled",  # its clone of Moonlight's toy_train Muon (optimizers/muon.py:18): @torch.compile
    transformers_newest=HALF_LOSS["4"],  # 4.6.0's Requires-Dist transformers<5.20.0 (releases.py HALF_LOSS)
    peft_newest=(0, 20, 0),  # 4.6.0's Requires-Dist peft<0.21,>=0.11: pip's newest under it (.fwenv/ms-swift)
    all_linear_names=True,  # all-linear: swift/utils/transformers_utils.py:178 find_all_linears (pipelines/train/tuner.py:107)
    name="swift",
    # gradient_checkpointing_enable, then enable_input_require_grads (v4.5.2 swift/trainers/mixin.py:939-941)
    input_grads=True,
    device_map_load=True,  # device_map cuda:rank at every line (boft_P stays on the CPU under transformers 4)
    # its RLHF trainers zero every dropout where TRL's config says so (v4.4.3 swift/rlhf_trainers/rlhf_mixin.py:31-34;
    # v2.6.1 swift/trainers/mixin.py:745-748), KTO's always (kto_trainer.py:32), PPO's through TRL's own __init__
    zeroes_dropout={
        "dpo": TRL_ZEROES_DROPOUT["dpo"] + "; ms-swift 4.6 swift/rlhf_trainers/rlhf_mixin.py:31-34",
        "kto": "ms-swift sets disable_dropout True for KTO (v4.4.3 swift/rlhf_trainers/kto_trainer.py:32; v2.6.1 "
        "swift/trainers/rlhf_trainer/kto_trainer.py:54): " + TRL_DISABLE_DROPOUT,
        "gkd": TRL_ZEROES_DROPOUT["gkd"] + "; ms-swift 4.6 swift/rlhf_trainers/rlhf_mixin.py:31-34",
        "ppo": TRL_ZEROES_DROPOUT["ppo"] + " (ms-swift 4.6 swift/rlhf_trainers/ppo_trainer.py:64 calls it)",
    },
    image_knobs=("MAX_PIXELS", "MAX_NUM"),  # qwen_vl_utils' pixel cap; its InternVL template's tiles
    reads=("swift",),
    signs=(
        Signs("swift-sample", lambda k, d: "model" in k and bool(k & SAMPLE_KEYS), 43, refused=SAMPLE),
        Signs("swift-megatron", _megatron, 44, refused=MEGATRON),  # before LLaMA-Factory's v1 schema (50)
        Signs("swift", lambda k, d: "model" in k and bool(k & SIGN_KEYS or "ENV" in k), 70),
    ),
    # `swift sft|pt|rlhf`, or its entry script under another launcher; its reader reads the flags and the file
    # (reader.read_cli), and NPROC_PER_NODE where swift's own CLI starts the processes
    tools=(
        Tool(
            "swift",
            trains=("sft", "pt", "rlhf"),
            script=r"swift/cli/(sft|pt|rlhf)\.py$",
            modules=("swift",),
            reads="cli",
            # 3.10-4.0.x's `swift sft --config x.yaml` (reader.read_cli: CONFIG_FLAG); a first positional file from 4.5
            config_flag="config",
            idle=IDLE,
        ),
    ),
    package="ms-swift",  # its pinned version decides the release (planner.intake.releases)
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    label="ms-swift",
    version="ms-swift 4.6.0",
    gkd_loss="chunked",
    # KTO: the KL batch's and the rows' whole logits (rlhf_trainers/kto_trainer.py:53,59-61,128, ms-swift 4.6.0)
    kto_logprobs="full",  # rlhf_trainers/gkd_loss.py:94-148, 224-271 (planner.estimate.gkd)
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "num_labels",
        "negatives",
        "precision",
        "zero_stage",
        "offload",
        "attention",
        "optimizer_rank",  # --galore_rank
        "optimizer_targets",  # --galore_target_modules
        "optimizer_projection",  # --galore_proj_type (trainers/arguments.py:198)
        "client_optimizer",  # a DeepSpeed config without an optimizer entry (deepspeed reader)
        "zero_buckets",  # the bucket sizes a DeepSpeed JSON sets itself (deepspeed reader)
        "lora_rank",
        "quant",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_ends",  # LoRA on embed_tokens / lm_head (its target list: intake.loraargs.END_NAMES)
        "lora_dropout",
        "trained_layers",  # --freeze_parameters_ratio 1 --trainable_parameters; --tuner_type llamapro (reader_freeze)
        "lora_base_fp32",
        "lora_vision",
        "frozen",
        "vit_checkpointing",
        "tensor_parallel",
        "sequence_parallel",
        "cp_attention",
        "device_map",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
        "lora_dropout_kept": (False,),  # its CLI takes no disable_dropout (TRL's config default)
        "lora_tower_full": (False, True),  # --tuner_type lora_llm, 4.x only (LORA_LLM_RULES)
        # --use_galore (swift/trainers/arguments.py:192-207; optimizers/galore/utils.py:189-214: GaLoreAdamW for
        # adamw_torch(_fused), GaLoreAdamW8bit for the 8-bit optims) and --optimizer muon (optimizers/muon.py:9-52,
        # Moonlight's Muon); no APOLLO
        "optimizer": (
            *TORCH_OPTIMIZERS,
            "galore-adamw",
            "galore-adamw-8bit",
            "muon",
            "muonclip",  # --optimizer muonclip, v4.0.0+ (MUONCLIP_RULES)
            *TRANSFORMERS_TORCHAO,
            *TRANSFORMERS_ONE_STATE,
        ),
        # several visible GPUs to a process are its device_map (reader._device_map), never nn.DataParallel
        "dataparallel": (False,),
        # LoRA and use_dora, AdaLoRA, VeRA, BOFT and its bottleneck adapter; no OFT (ms-swift 4.6
        # arguments/base_args/base_args.py:57 get_supported_tuners)
        "lora_variant": ("lora", "dora", "adalora", "vera", "boft", "adapter"),
        "checkpointing": ("off", "full"),
        "loss": ("standard", "chunked", "fused"),  # chunked: CELOSS_PARALLEL_SIZE, under sequence parallel only
        "batching": ("padded", "packed"),
        "fsdp": ("off", "full"),
        "optimizer_in_backward": (False,),
        "expert_parallel": ("off",),
        "workload": (
            "sft",
            "dpo",
            "grpo",
            "gkd",
            "kto",
            "ppo",
        ),  # ppo: read (rules: not written); gkd: swift rlhf --rlhf_type gkd (rlhf_trainers/gkd_trainer.py); kto: --rlhf_type
        # kto (rlhf_trainers/kto_trainer.py: the KL batch without grad first, :53, then the rows, :58-61)
        # --task_type (ms-swift 4.6 swift/arguments/base_args/model_args.py:72; decision is not planned)
        "task": ("causal-lm", "seq-cls", "embedding", "reranker", "generative-reranker"),
        # --trainable_parameters' last or first layers; --tuner_type llamapro's blocks inserted at load (reader_freeze);
        # no checkpoint another script expanded is read as LLaMA-Pro's (it is full freeze tuning's to ms-swift)
        "trained_layout": ("last", "first", "inserted"),
        "context_parallel": ("off",),  # ring attention comes inside --sequence_parallel_size, with flash-attn
    },
    defaults={
        "lora_rank": Default(8, "swift/arguments/tuner_args.py:133 (tuner_type lora, base_args.py:56-58)"),
        "lora_targets": Default("all-linear", "swift/arguments/tuner_args.py:126"),
        "checkpointing": Default("full", "swift/trainers/arguments.py:135: gradient_checkpointing True"),
        "frozen": Default("vision+projector", "swift/arguments/tuner_args.py:122-124: freeze_vit, freeze_aligner True"),
        "micro_batch": Default(1, "swift/trainers/arguments.py:130: per_device_train_batch_size 1"),
        "grad_accum": Default("ceil(16 / micro / world)", "swift/trainers/arguments.py:289-292"),
        "optimizer": Default("adamw-fused", "transformers training_args.py: optim adamw_torch_fused on torch >= 2.8"),
        "precision": Default(
            "bf16", "swift/model/utils.py:247-266: torch_dtype from the config, bf16 on GPUs that have it"
        ),
    },
    sft_head="swift-sp",
    # DPO padding-free (--padding_free, or --packing which sets it: swift/arguments/sft_args.py:186-197, flash-attn
    # only) and under --sequence_parallel_size (swift/rlhf_trainers/rlhf_mixin.py:66-67 splits, :178-179 gathers the
    # per-token log-probs)
    dpo_runs={
        "packed": "swift/arguments/rlhf_args.py:710-717 (padding_free/packing: grpo, dpo, kto, gkd)",
        "sequence_parallel": "swift/arguments/rlhf_args.py:719-725 (sequence_parallel: grpo, dpo)",
    },
    # KTO padding-free (its rows one packed row, its KL rows another: template/base.py:1884-1893), no Ulysses for it
    kto_runs={"packed": "swift/arguments/rlhf_args.py:710-717 (padding_free/packing: grpo, dpo, kto, gkd)"},
    kto_why={"sequence_parallel": KTO_NO_SP},
    # GRPO under --sequence_parallel_size (rlhf_args.py:719-725): each rank scores its slice of every completion
    # from the slice's logits (rlhf_trainers/grpo_trainer.py:1470-1494, planner.estimate.temp_terms.swift_logps),
    # and runs S micro-steps for each (:152-153: the SP group's ranks share their rows)
    grpo_sp="swift/arguments/rlhf_args.py:719-725; rlhf_trainers/grpo_trainer.py:152-153, 1470-1494",
    grpo_old_logps="always",  # rlhf_trainers/grpo_trainer.py:760-763
    grpo_chord=True,  # rlhf_trainers/utils.py:1633-1675
    grpo_logprobs="swift",  # rlhf_trainers/grpo_trainer.py:1564-1600 (planner.estimate.temp_terms.swift_logps)
    pads_per_batch=(  # padding_to is LongLoRA's alone (refused: planner.intake.tuners), so --max_length is a cap
        "ms-swift pads each micro-batch to its longest row: v4.5.2 swift/trainers/mixin.py:151-153 (padding_to "
        "None but for LongLoRA), swift/template/base.py:2005-2018, :2198-2211 (torch's pad_sequence)"
    ),
    keys=KEYS.shown(  # the frameworks table's keys, named by the key table
        "micro_batch grad_accum checkpointing zero_stage offload=zero_stage fsdp optimizer loss attention "
        "precision lora lora_rank quant seq_len batching=packing model frozen=frozen_vision vit_checkpointing "
        "sequence_parallel tensor_parallel",
        loss=f"{KEYS.flag('loss')} (fused), CELOSS_PARALLEL_SIZE (chunked)",
    ),
    notes=("LoRA, checkpointing and a frozen ViT by default; accumulation defaults to a total batch of 16",),
    releases=RELEASES,
    rules=(
        VLM_LORA_ENDS,
        OMNI_WHOLE,
        *LORA_LLM_RULES,
        *MUONCLIP_RULES,
        *torchao_line_rules("swift"),
        transformers_5_quant("swift"),  # ms-swift 4 on transformers 5: no compressed-tensors or HQQ base
        peft_fp8_quant("ms-swift", "requirements/framework.txt: v3.10.3 <0.18, v4.0.0 <0.19"),
        stacked_experts_prequant("swift"),
        Rule(  # the accumulation its GRPO runs under sequence parallel is the flag's x S (reader_rl.grpo_split_steps)
            "grad_accum",
            lambda k, w: (
                f"GRPO under --sequence_parallel_size {k['sequence_parallel']} runs --gradient_accumulation_steps and "
                f"--steps_per_generation x {k['sequence_parallel']} micro-steps (rlhf_trainers/grpo_trainer.py:152-153, "
                f"rollout_mixin.py:328-330): an accumulation of {w.grad_accum} micro-steps, a generation every "
                f"{workload_of(k).steps_per_gen(w.grad_accum)}, is not one"
            ),
            _split_steps,
            scope="split",
        ),
        Rule(
            "loss",
            "--loss chunked is CELOSS_PARALLEL_SIZE, which chunks its loss under --sequence_parallel_size only "
            "(swift/trainers/seq2seq_trainer.py:162-167): give --sequence-parallel 2 or more",
            lambda k: k["loss"] == "chunked" and k["sequence_parallel"] < 2,
        ),
        Rule(
            "batching",
            "--batching packed needs --attention flash (packing and padding_free need flash attention, "
            "swift/arguments/sft_args.py:186-197)",
            lambda k: k["batching"] == "packed" and k["attention"] != "flash",
        ),
        autotp_rule("swift/arguments/sft_args.py:158-160"),
        Rule(
            "tensor_parallel",
            "--deepspeed_autotp_size is for full fine-tuning only (swift/arguments/sft_args.py:158-160): --lora-rank 0",
            lambda k: k["tensor_parallel"] > 1 and k["lora_rank"] > 0,
        ),
        Rule(
            "trained_layers",
            "keeps every weight in --torch_dtype, the frozen layers too (swift/pipelines/train/tuner.py:403-409): its "
            "freeze tuning under torch AMP holds fp32 frozen layers, not planned; give --precision bf16-pure "
            "(--torch_dtype bfloat16, its default) or ZeRO",
            lambda k: k["trained_layers"] > 0 and k["precision"] in ("bf16", "fp16") and not k["zero_stage"],
        ),
        Rule(
            "workload",
            "full DPO keeps a reference model (swift/arguments/rlhf_args.py:290-299): no precompute_ref_log_probs",
            full_dpo_precomputed,
        ),
        Rule(
            "lora_targets",
            "needs --target_modules beside stacked experts' --target_parameters (its default, all-linear, would "
            "adapt every linear): name a module too",
            only_expert_targets,
        ),
        *hf_ppo_rules(
            "--rlhf_type ppo",
            "trl 0.29.1 experimental/ppo/ppo_trainer.py:679-692",
            "swift sft and rlhf dpo / grpo / gkd",
        ),
    ),
    # --rlhf_type ppo (swift/rlhf_trainers/ppo_trainer.py, reader_ppo.py): TRL's PPOTrainer, every role in every
    # process; its GRPO is TRL's (planner.estimate.rl), not by roles
    role_engine=RoleEngine(
        defaults={"remove_padding": False},  # padded rows (left-padded queries, swift/arguments/rlhf_args.py)
        grpo=False,
        generate_gathers=True,  # unwrap_model_for_generation over policy and value model (ppo_trainer.py:679-684)
        keeps_scores=True,  # batch_generation's output_scores, kept through the step (planner.estimate.trl_ppo)
        joint_value_update=True,  # PolicyAndValueWrapper: one forward and backward of both (ppo_trainer.py:284-295)
    ),
    # swift/model/register.py:161,253,295: ModelLoader.default_trust_remote_code True, config and model loaded with
    # it; model/models/internlm.py:105-264: OpenGVLab/InternVL2_5-*, InternVL3-* register InternVLLoader with
    # architectures InternVLChatModel (the repository's code), :320-363 only the -hf ids the native classes
    remote_code=True,
    # its weight sync to a vLLM server gathers --move_model_batches groups of layers (planner.estimate.weight_sync)
    sync_groups=True,
    grpo_teacher=True,  # OPD-RL from v4.4.0: the 4 line (4.0-4.6) is read as 4.4-4.6 run it
    gkd_vllm=True,  # from v3.10.0: the 3.9 line's 3.9.x reads --use_vllm for GRPO alone (releases.py)
    # --deepspeed zero0..zero3_offload name swift/config/<word>.json (swift/arguments/sft_args.py:261-264)
    deepspeed_words=("zero0", "zero1", "zero2", "zero3", "zero2_offload", "zero3_offload"),
    # --target_modules all-linear on a VLM: the LLM's linears only, freeze_vit and freeze_aligner True by default
    # (swift/utils/transformers_utils.py:208-215)
    all_linear_vision=False,
)
