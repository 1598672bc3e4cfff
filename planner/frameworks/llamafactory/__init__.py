"""LLaMA-Factory 0.9.5 (`llamafactory-cli train x.yaml`): LoRA by default, full-layer checkpointing on by default,
Liger's fused loss, packing, ZeRO through its DeepSpeed JSONs, FSDP through an accelerate config, SFT and DPO.
Files cited are in the 0.9.5 wheel (src/llamafactory/...).

Its release lines, what moved between them and the keys only some take: releases.py."""

from planner.frameworks.base import NO_SPLITS, Default, Framework
from planner.frameworks.llamafactory.keys import KEYS
from planner.frameworks.llamafactory.releases import RELEASES, RULES, SPANS, TRAIN_BASH, TRAIN_PY
from planner.frameworks.llamafactory.signs import SIGNS
from planner.frameworks.rl import RoleEngine
from planner.frameworks.runs import (
    TORCH_OPTIMIZERS,
    TRANSFORMERS_LOW_RANK,
    TRANSFORMERS_ONE_STATE,
    TRANSFORMERS_TORCHAO,
)
from planner.frameworks.tool import Tool
from planner.frameworks.trl.releases import TRL_DISABLE_DROPOUT

HP = "llamafactory 0.9.5 hparams"
# its other commands, which train nothing (v0.9.5 src/llamafactory/launcher.py:136-164)
IDLE = (
    ("chat", "inference (a chat in the terminal)"),
    ("webchat", "inference (a chat web UI)"),
    ("api", "an inference server"),
    ("export", "an export (a merge or quantisation)"),
    ("eval", "evaluation"),
    ("webui", "a web UI"),
)
FRAMEWORK = Framework(
    low_rank_order="vectors-first",  # its GaLore / APOLLO step order (planner.frameworks.memory.Memory)
    transformers_newest=(5, 6, 0),  # v0.9.5 pyproject.toml:43 transformers<=5.6.0 (each line's: releases.py)
    peft_newest=(0, 18, 1),  # v0.9.5's Requires-Dist peft<=0.18.1,>=0.18.0 (.fwenv/llamafactory's METADATA)
    all_linear_names=True,  # lora_target all: model/model_utils/misc.py:28 find_all_linear_modules (adapter.py:206)
    name="llamafactory",
    one_process_dataparallel=True,
    image_knobs=(KEYS.key("max_pixels"), ""),  # image_max_pixels; no InternVL tile count of its own
    # packing is SFT's (v0.9.5 src/llamafactory/data/loader.py:200-201: the packed processor for stage sft only;
    # hparams/parser.py:320-321 refuses neat_packing outside SFT); no sequence parallel at all
    dpo_why={
        "packed": "LLaMA-Factory packs SFT rows only (v0.9.5 data/loader.py:200-201; parser.py:320-321 neat_packing)"
    },
    logprobs="full",  # DPO from the whole logits in fp32 (train/dpo/trainer.py:230): the reader cites it
    kto_why={"packed": "LLaMA-Factory packs SFT rows only (v0.9.5 data/loader.py:200-201, stage kto :221-222)"},
    # its collators pad a micro-batch to that batch's longest row (transformers' DataCollatorForSeq2Seq, padding=True),
    # so cutoff_len is a cap
    pads_per_batch=(
        "LLaMA-Factory pads each micro-batch to its longest row: v0.9.5 src/llamafactory/train/sft/workflow.py:62-65 "
        "(dpo/workflow.py:48-51, kto/workflow.py:48-51: pad_to_multiple_of 8), data/collator.py:137, :416 "
        "(transformers' DataCollatorForSeq2Seq, padding=True: 5.6.0 data/data_collator.py:523); v0.7.1 "
        "src/llmtuner/train/sft/workflow.py:42-44 alike"
    ),
    pad_multiple=8,  # pad_to_multiple_of 8 while training (v0.9.4 train/sft/workflow.py:61, dpo/kto alike)
    kto_kl_after=True,  # KTO: the rows' forward, then the KL batch's without grad (0.9.5 train/kto/trainer.py:187-189)
    fp32_logps=True,  # DPO and KTO: .logits.to(torch.float32), one log_softmax (dpo/trainer.py:230, kto/trainer.py:179)
    kto_keeps_logits=True,  # KTO's chosen / rejected logits indexed out of the rows' (kto/trainer.py:194-196)
    # stage rm: trl's AutoModelForCausalLMWithValueHead over the causal LM (0.9.5 model/loader.py:185-187), its logits
    # made and cast to fp32 in every forward (trl 0.24.0 models/modeling_value_head.py:169-181), then discarded
    value_head_rm=True,
    # DPO's and KTO's trainers zero every dropout (disable_dropout True: v0.9.4 src/llamafactory/train/dpo/trainer.py:51,
    # :57-60, kto/trainer.py:50, :56-59; v0.7.1 src/llmtuner/train/dpo/trainer.py:28-34); its PPO (TRL 0.9's) does not
    zeroes_dropout={
        "dpo": "LLaMA-Factory's DPO trainer: "
        + TRL_DISABLE_DROPOUT
        + " (v0.9.4 src/llamafactory/train/dpo/trainer.py:57-60)",
        "kto": "LLaMA-Factory's KTO trainer: "
        + TRL_DISABLE_DROPOUT
        + " (v0.9.4 src/llamafactory/train/kto/trainer.py:56-59)",
    },
    reads=("llamafactory",),
    signs=SIGNS,
    # `llamafactory-cli train x.yaml` (`lmf` too): the processes of its torchrun read by reader.read_launcher
    tools=(Tool("llamafactory-cli", trains=("train", "sft"), aliases=("lmf",), modules=("llamafactory",), idle=IDLE),),
    writes=True,  # writer.py (planner.export.launch dispatches to it)
    package="llamafactory",  # its pinned version decides the release (planner.intake.releases); llmtuner to 0.7.1
    package_aliases=("llmtuner",),
    # src/train_bash.py through v0.7.0, src/train.py and llamafactory-cli from v0.7.1 (src/ at each tag)
    entry_points=(("train_bash.py", TRAIN_BASH), ("llamafactory-cli", TRAIN_PY), ("src/train.py", TRAIN_PY)),
    vocabulary=("stage", "finetuning_type", "template"),  # hparams/finetuning_args.py, data_args.py at every tag
    releases=RELEASES,
    key_spans={"train": SPANS},
    label="LLaMA-Factory",
    version="llamafactory 0.9.5",
    every=(  # every value of these (closed by default: planner.frameworks.base.Framework.runs)
        "precision",
        "zero_stage",
        "offload",
        "attention",
        "optimizer_rank",  # galore_rank / apollo_rank
        "optimizer_targets",  # galore_target / apollo_target
        "optimizer_projection",  # galore_proj_type / apollo_proj_type (hparams/finetuning_args.py:291, 334)
        "client_optimizer",  # a DeepSpeed config without an optimizer entry (deepspeed reader)
        "zero_buckets",  # the bucket sizes a DeepSpeed JSON sets itself (deepspeed reader)
        "lora_rank",
        "quant_absmax",
        "lora_targets",
        "lora_train_embeddings",
        "lora_ends",  # LoRA on embed_tokens / lm_head (its target list: intake.loraargs.END_NAMES)
        "lora_dropout",
        "lora_base_fp32",
        "frozen",
        "trained_layers",  # freeze tuning (planner.estimate.freeze)
        "cp_attention",
        "eval_batch",
        "eval_logits_steps",
        "save_weights",
    ),
    runs={
        "fsdp_load": ("sharded",),  # its FSDP loads shards or a unit at a time (Knobs.fsdp_load)
        "lora_dropout_kept": (False,),  # its DPO / KTO trainers zero dropout always (no key)
        "lora_tower_full": (False,),
        # last, first (a negative freeze_trainable_layers), LLaMA-Pro's interleaved blocks (use_llama_pro on a
        # checkpoint scripts/llama_pro.py expanded); no blocks inserted at load (ms-swift's --tuner_type llamapro)
        "trained_layout": ("last", "interleaved", "first"),
        # use_galore, use_apollo and use_muon (hparams/finetuning_args.py:263-350, 503-506; train/trainer_utils.py:
        # 200-370, 498-524)
        "optimizer": (
            *TORCH_OPTIMIZERS,
            *TRANSFORMERS_LOW_RANK,
            "muon",
            *TRANSFORMERS_TORCHAO,
            *TRANSFORMERS_ONE_STATE,
        ),
        "device_map": ("off",),  # one process a GPU
        # finetuning_type oft from v0.9.4 (rules refuse it before); no adalora or vera at 0.6.3 .. 0.9.5
        # (finetuning_args.py:464)
        "lora_variant": ("lora", "dora", "oft"),
        "dataparallel": (False, True),  # before v0.8 only (rules)
        # stage rm: a reward model (seq-cls, one value, chosen and rejected rows: rules) as trl's value-head model,
        # the vocabulary head kept beside it (Framework.value_head_rm); the causal LM's other stages
        "num_labels": (1,),
        "negatives": (0, 1),
        "task": ("causal-lm", "seq-cls"),
        # freeze_vision_tower false beside LoRA keeps the tower's linears in lora_target all (0.9.5
        # model/model_utils/misc.py:40-41, visual.py:200-209): adapters on the tower
        "lora_vision": (False, True),
        "vit_checkpointing": ("on",),  # HF's gradient_checkpointing_enable reaches the tower; no key leaves it out
        # use_unsloth_gc (v0.9.0 on): each checkpointed layer's input copied to the host, the layer run under no_grad
        # and recomputed in backward (0.9.5 model/model_utils/checkpointing.py:43-77, :55 hidden_states.to("cpu"); the
        # same at v0.9.0 :41-75): offload-inputs; no key keeps every saved tensor on the host
        "checkpointing": ("off", "full", "offload-inputs"),
        "loss": ("standard", "fused"),
        "batching": ("padded", "packed"),
        "fsdp": ("off", "full"),
        # galore_layerwise / apollo_layerwise (train/trainer_utils.py:248-275, 335-360): GaLore's and APOLLO's only
        "optimizer_in_backward": (False, True),
        "expert_parallel": ("off",),
        # a GPTQ or AWQ checkpoint for LoRA or OFT (0.9.5 model/model_utils/quantization.py:117-124, model/adapter.py:
        # 306-308): AWQ asks autoawq's metadata only (check_version, extras/misc.py:74-91; autoawq 0.2.9 installs
        # beside any torch), and transformers 5.6 (pyproject.toml:43) loads it through gptqmodel (quantizer_awq.py:48-52)
        "quant": ("none", "nf4", "fp4", "int8", "gptq", "awq"),
        "workload": ("sft", "dpo", "kto", "ppo"),  # ppo: stage ppo, read (rules: not written)
        **NO_SPLITS,  # 0.9.5's hparams hold no sequence, context or tensor parallel size (v1 and Megatron aside)
    },
    defaults={
        "lora_rank": Default(8, f"{HP}/finetuning_args.py:77 (finetuning_type lora, :464)"),
        "lora_targets": Default("all-linear", f"{HP}/finetuning_args.py:81: lora_target all"),
        "checkpointing": Default(
            "full",
            f"{HP}/model_args.py:145: disable_gradient_checkpointing False "
            "(model/model_utils/checkpointing.py:173-176 turns it on)",
        ),
        "seq_len": Default(2048, f"{HP}/data_args.py:46: cutoff_len 2048"),
        "frozen": Default(
            "vision+projector",
            f"{HP}/finetuning_args.py:527,531: freeze_vision_tower, freeze_multi_modal_projector True",
        ),
        "optimizer": Default("adamw-fused", "transformers training_args.py: optim adamw_torch_fused on torch >= 2.8"),
        "micro_batch": Default(8, "transformers training_args.py: per_device_train_batch_size 8"),
        "grad_accum": Default(1, "transformers training_args.py: gradient_accumulation_steps 1"),
    },
    keys=KEYS.shown(  # the frameworks table's keys, named by the key table
        "micro_batch grad_accum checkpointing zero_stage offload=zero_stage fsdp optimizer loss attention "
        "precision lora_rank quant seq_len batching=packing model frozen=frozen_vision",
        fsdp="accelerate config (fsdp_config.yaml)",
        precision="bf16 / pure_bf16",
    ),
    notes=(
        "LoRA and checkpointing on by default; checkpointing offload-inputs is use_unsloth_gc",
        "trainable parameters upcast to fp32 unless pure_bf16 (model/adapter.py)",
    ),
    rules=RULES,
    # stage ppo (v0.8.3 src/llamafactory/train/ppo/, reader_ppo.py): TRL 0.9's PPOTrainer, every role in every process
    role_engine=RoleEngine(
        defaults={"remove_padding": False},  # padded rows (trainer.py:prepare_model_inputs)
        grpo=False,  # no GRPO stage
        value_head_on_policy=True,  # AutoModelForCausalLMWithValueHead (train/ppo/workflow.py:47)
        generate_gathers=True,  # unwrap_model_for_generation (trainer.py:348; trl 0.9.6 models/utils.py:161-165)
        # fp32 logits (trl 0.9.6 models/modeling_value_head.py:188-190), but upcasts_logprobs would move its DPO's
        # head too (its own fp32 terms: fp32_logps above): left off, the PPO passes' head in bf16 (an under-count)
    ),
    # extras/constants.py:1360-1398: its InternVL ids are the -hf conversions only; model/model_utils/visual.py:274
    # registers model_type internvl (the native classes) for freeze_vision_tower and the projector
    remote_code=False,
    # its lora_target all leaves out the tower and projector under freeze_vision_tower (its default):
    # model/model_utils/misc.py:37-41 (llamafactory 0.9.5)
    all_linear_vision=False,
)
