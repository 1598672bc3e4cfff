"""What a framework's memory means (the third of Framework's three parts, planner.frameworks.base): how it spends
memory apart from the recipe the knobs name (its log-prob heads, its vision tower's attention, its FSDP reduce and
accumulation, whose loop loads the model, its RL roles), and the precision a request that names none runs. The terms
themselves stay in planner.estimate, which reads these fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from planner.frameworks.rl import RoleEngine

# the workloads whose trainer zeroes dropout only as its config's disable_dropout says (TRL's DPO, KTO and GKD configs:
# True by default), where the knob lora_dropout_kept keeps it; TRL's PPOTrainer zeroes it always (trl v1.9.0
# trl/experimental/ppo/ppo_trainer.py:489-491)
DROPOUT_KEPT_BY_FLAG = ("dpo", "kto", "gkd")


@dataclass(frozen=True)
class Memory:
    """How a framework spends memory apart from the recipe (Framework's fields planner.estimate reads). `precision`
    reads Runs' `runs` and `defaults` (planner.frameworks.runs)."""

    # how it spends memory apart from the recipe (the terms stay in planner.estimate): "recipe", the plan's --loss as
    # memplan runs it; "fused-logprob", TRL's fused log-prob head for SFT (no full logits, whatever the model);
    # "swift-sp", ms-swift's own per-token loss under sequence parallel (recipe_terms.swift_sp_loss_bytes)
    sft_head: str = "recipe"
    # how the transformers it runs calls SDPA in a Qwen2-VL tower (planner.estimate.vision.masked_tower_bytes):
    # "split", per image or window, or with 4-D tensors a fused kernel takes (nothing grows with the square of the
    # patches); "masked-3d", transformers 4.45-4.50's Qwen2-VL and Qwen2.5-VL towers (a [1, N, N] mask over every
    # patch of the call and 3-D q/k/v, which the fused kernels refuse: torch's math backend computes every head's
    # N x N scores)
    tower_sdpa: str = "split"
    # it makes a frozen vision tower's input require a gradient under checkpointing, where the tower's class takes
    # the hook (VisionSpec.input_embeddings): the tower records a graph and its checkpointed blocks keep their inputs
    # (planner.estimate.vision.frozen_tower_checkpoint_bytes): ms-swift v2.5.0-v4.1.x (swift.releases TOWER_HOOK)
    frozen_tower_input_grads: bool = False
    # the order its GaLore / APOLLO optimizer steps the trained tensors in (planner.estimate.matrix_step.step_order):
    # "model", transformers 5.25's (trainer_optimizer.py:159-162: the rest in the model's order, then the targets);
    # "vectors-first", LLaMA-Factory 0.9.5's (train/trainer_utils.py:274-278: the vectors, the other matrices, the
    # targets); "targets-first", ms-swift 4.6's (optimizers/galore/utils.py:142-160: the targets, the other matrices,
    # the vectors)
    low_rank_order: str = "model"
    # its GaLore / APOLLO optim_target_modules all-linear projects the untied output head too
    # (planner.estimate.matrix_optim.low_rank_target): transformers' (5.16.1 trainer_optimizer.py:133-149: every
    # nn.Linear, lm_head among them; a tied head is no parameter of its own), which HF's Trainer, TRL's and axolotl's
    # run; LLaMA-Factory 0.9.5 (model/model_utils/misc.py:28-49 find_all_linear_modules forbids lm_head) and ms-swift
    # 4.5.2 (utils/transformers_utils.py:178-204 find_all_linears ignores it) name the decoder's linears alone
    low_rank_head: bool = False
    # which Muon keeps states for the vectors (norms, biases; planner.estimate.matrix_optim.muon_keeps_vectors):
    # "adamw", Moonlight's split (LLaMA-Factory 0.9.5 train/trainer_utils.py:504-511, ms-swift 4.6): AdamW's two
    # moments; "dropped", axolotl-contribs-mit 0.0.3-0.0.6's MuonOptimizerFactory (muon/muon.py:217-219: a parameter
    # under 2-D never reaches the optimizer: no state, never stepped); "dropped-one-gpu", dropped on one GPU and AdamW's
    # under DistMuon where several (axolotl v0.14.0+ core/builders/base.py: DistMuonOptimizerFactory with a device mesh)
    muon_vectors: str = "adamw"
    # how its Muon runs Moonlight's zeropower_via_newtonschulz5 (planner.estimate.muon_step): "eager", LLaMA-Factory
    # 0.9.3-0.9.5's copy (third_party/muon/muon.py:48, no decorator); "compiled", under @torch.compile (Moonlight's
    # examples/toy_train.py, which ms-swift clones; axolotl-contribs-mit 0.0.3-0.0.6 muon.py:13)
    muon_newton_schulz: str = "eager"
    # its Muon runs under FSDP2 (planner.config.spec_rules.matrix_optimizer_rules): axolotl from v0.14.0
    # (utils/schemas/validation.py:891-903 refuses DeepSpeed and FSDP1 alone), on one GPU as without FSDP (its rules)
    muon_fsdp: bool = False
    # the dtype of the logits a causal LM's forward returns in training (what torch's nn.DataParallel gathers onto
    # GPU 0: planner.estimate.dataparallel): "compute", the model's (transformers 4.46.0 modeling_llama.py:1210-1214,
    # the upcast moved into loss_utils.py:36); "fp32", transformers through 4.45 (4.40.2 modeling_llama.py:1231,
    # 4.45.2 :1214-1219: logits.float() in the forward)
    returned_logits: str = "compute"
    # the newest transformers any release of the line pins, where a model's head depends on it (Traits.half_loss:
    # planner.estimate.loss_dtype.half_loss); () where unsaid: the transformers memplan reads (an fp32 loss). A release
    # line keeps the newest's value unless its Release.adapter says its own (Framework.at): say () where it pins none
    transformers_newest: tuple[int, ...] = ()
    # the newest PEFT the line pins, where PEFT's release changes memory (planner.frameworks.peft.peft_of); () where it
    # pins none: the newest PEFT, 0.22.0 (constraints.txt). A release line keeps the newest's value unless its
    # Release.adapter says its own (Framework.at); read on transformers-5 lines alone (peft_of)
    peft_newest: tuple[int, ...] = ()
    # its "all linear" LoRA is its own list of nn.Linear leaf names handed to PEFT, not PEFT's "all-linear": what
    # that reaches in an MoE model differs (planner.frameworks.peft)
    all_linear_names: bool = False
    # how its GRPO scores a multimodal model's tokens (planner.estimate.recipe_terms.whole_logits_logps_bytes): "recipe",
    # as --logprobs says; "whole", ms-swift 3.2-3.6's: the model's logits over every token of the rows (no
    # logits_to_keep for a multimodal model), the completion's slice divided by the temperature, then TRL's
    # selective_log_softmax row by row (v3.4.1 swift/trainers/rlhf_trainer/grpo_trainer.py:1181-1197)
    vlm_logprobs: str = "recipe"
    # where its GRPO runs the reference model's log-prob pass (planner.estimate.ref_in_step): "between", before the
    # micro-step as TRL does; "in-step", inside the loss after the policy's forward (ms-swift 3.5-3.6)
    grpo_reference: str = "between"
    # how its GRPO scores the tokens (planner.estimate.temp_terms.swift_logps): "recipe", as --logprobs says (TRL
    # 1.16's fused head by default); "swift", ms-swift 4.6.0's own: the model's logits over the completion
    # (logits_to_keep + 1), divided in place, TRL's selective_log_softmax (swift/rlhf_trainers/grpo_trainer.py:
    # 1564-1600), and under sequence parallel the logits of every token of the rank's slice (:1470-1494);
    # "swift-copy", ms-swift 3.x's: the kept logits divided into a copy (v3.7.0 :1470-1477, v3.12.0 :1573-1599)
    grpo_logprobs: str = "recipe"
    # when its GRPO runs the old policy's log-prob pass (Workload.computes_old_logps): "aligned", TRL's rule (only when
    # generation is not aligned with the optimizer step, or under vLLM); "always", every generation batch (ms-swift
    # from v3.11.0: v4.6.0 swift/rlhf_trainers/grpo_trainer.py:760-763, no condition; v3.10.0 :815-817 asked
    # old_policy())
    grpo_old_logps: str = "aligned"
    # what shrinks a vision tower's call, in its own words (planner.search.advice.tower_fix): an image's pixel cap, and
    # InternVL's tiles an image; "" where it has no word of its own (memplan's --image-tokens is named)
    image_knobs: tuple[str, str] = ("", "")
    # GKD's JSD (planner.estimate.gkd): "whole", TRL's generalized_jsd_loss over every token's logits; "chunked",
    # "completion", TRL v1.0.0 .. v1.6.x's over the completion's positions of every token's logits; "chunked",
    # ms-swift's over the completion's, 512 tokens a chunk; "" where it does not run --workload gkd
    gkd_loss: str = ""
    # FSDP2's reduce dtype under bf16: "fp32" (MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), the bundled
    # trainer's recipe.shard_fsdp) or "param" (accelerate's default policy reduces in the param dtype,
    # accelerate/utils/dataclasses.py:2135-2137, accelerate 1.15.0: what HF's Trainer and the frameworks on it run)
    fsdp_reduce: str = "param"
    # the DeepSpeed config's data_types.grad_accum_dtype (planner.estimate.zero.fp32_grad_accum): "param", none (the
    # weights' dtype under ZeRO, DeepSpeed 0.14.4 runtime/engine.py:889-893); "fp32", OpenRLHF through v0.5.3
    # (utils/deepspeed/deepspeed_utils.py:52 "grad_accum_dtype": ... else "fp32"; None from v0.5.4, commit 47f7cd8f)
    zero_grad_accum: str = "param"
    # the accelerate it pins casts a LoRA run's frozen shards to fp32 too under FSDP with mixed precision: 1.6.0 ..
    # 1.12.0's fsdp2_prepare_model ends with model.to(torch.float32) after fully_shard (utils/fsdp_utils.py:562-565 at
    # 1.6.0); from 1.13.0 only the parameters that require a gradient (:733-740). planner.estimate.trained reads it
    fsdp_frozen_fp32: bool = False
    # FSDP gradient accumulation: True skips the reduce-scatter on all but the last micro-step (HF Trainer's
    # accelerator.no_sync: unsharded gradients between micro-steps); False reduce-scatters every micro-step
    fsdp_no_sync: bool = True
    # whose loop loads the model and saves checkpoints (planner.estimate.lifecycle): "hf", HF's Trainer through
    # accelerate (the frameworks on it too); "bundled", the bundled trainer (trainer/, recipe/model.py)
    loop: str = "hf"
    # which code it builds a model id with (planner.model.catalog.checkpoints): True, the repository's own modeling
    # code where the checkpoint ships one (trust_remote_code); False, transformers' classes only (a remote-code
    # model is then named by its native conversion); None, not read for this framework yet (the catalog id)
    remote_code: bool | None = None
    # an RL run planned by its roles (planner.estimate.roles) and how they spend memory; None: GRPO and DPO as one
    # trainer (planner.estimate.rl)
    role_engine: RoleEngine | None = None
    # the weight sync to a vLLM server gathers the model in groups of layers (ms-swift's --move_model_batches,
    # planner.estimate.weight_sync), else parameter by parameter
    sync_groups: bool = False
    # its GKD takes the student's on-policy completions from vLLM (--use_vllm: colocated on the training GPUs or a
    # server), with GRPO's engine, sleep levels, offload and weight sync (ms-swift's RolloutTrainerMixin from v3.10.0,
    # eccb1fd22 "[GKD] refactor GKD to support vLLM rollout"; v4.5.2 swift/rlhf_trainers/gkd_trainer.py:50); else HF's
    # generate on the training GPU
    gkd_vllm: bool = False
    # its GRPO takes a teacher whose log-probs on the sampled tokens join the advantage (ms-swift's OPD-RL from v4.4.0,
    # 46f03e977; v4.5.2 swift/rlhf_trainers/grpo_trainer.py:558-593, scored beside the old and reference log-probs
    # before the step, :776-805), one generation a prompt allowed (swift/arguments/rlhf_args.py:394-413)
    grpo_teacher: bool = False
    # its GRPO takes CHORD's expert SFT rows (workload.chord_sft_batch; ms-swift from v3.9.0, v3.9.0 swift/llm/train/
    # rlhf.py:180): their forward inside the micro-step after GRPO's, one backward over both losses (v4.6.0
    # swift/rlhf_trainers/grpo_trainer.py:1223-1224, utils.py:1633-1675; planner.estimate.chord)
    grpo_chord: bool = False
    # the dtype of its LoRA adapters on a half base (planner.estimate.trained): "fp32", PEFT's autocast_adapter_dtype;
    # "model", the recipe's own dtype (torchtune 0.6.1: LoRALinear's nn.Linear adapters, torchtune/modules/peft/
    # lora.py:91-92, built under training.set_default_dtype(dtype), recipes/lora_finetune_single_device.py:431 and
    # lora_finetune_distributed.py:459, checked by validate_expected_param_dtype, :479): their gradients and AdamW's
    # states in it too
    lora_adapter_dtype: str = "fp32"
    # PEFT's all-linear adapts a VLM's tower and projector too (planner.intake.settle); False where the framework's
    # own all-linear leaves them out
    all_linear_vision: bool = True
    # the log-prob head its DPO and GRPO trainers run where a request names none (planner.config.release): TRL's
    # fused head, or "full", the whole logits
    logprobs: str = "fused"
    # its KTO trainer's head where that differs (ms-swift's scores the whole logits, "full"); "" as `logprobs`
    kto_logprobs: str = ""
    # its KTO scores the KL batch after the policy's forward (its activations and logits live), not before it as TRL's
    kto_kl_after: bool = False
    # its DPO and KTO score the whole logits cast to fp32, one log_softmax over every row (planner.estimate.fp32_logps)
    fp32_logps: bool = False
    # its reward model (seq-cls, one label, chosen and rejected rows) is trl's value-head model: the causal LM keeps its
    # vocabulary head and makes the whole logits beside the value head (planner.estimate.heads.value_head_bytes)
    value_head_rm: bool = False
    # its KTO keeps the rows' fp32 logits over the KL batch's pass and copies the chosen and rejected rows out of them
    kto_keeps_logits: bool = False
    # its KTO takes the policy's entropy from a flattened copy of its whole logits after the reference's forward, both
    # models' logits live (TRL v1.8.0 .. 1.13.x; trl@1.0's and trl@1.7's index copies held to it:
    # planner.estimate.kto_entropy)
    kto_entropy_copy: bool = False
    # under checkpointing it makes the embedding's output require a gradient (enable_input_require_grads), so freeze
    # tuning's frozen layers below the trained ones are checkpointed and recomputed too (planner.estimate.freeze)
    input_grads: bool = False
    # it loads the model with a one-device device_map (ms-swift: cuda:rank), which transformers 4 records as the
    # model's hf_device_map (4.57.1 modeling_utils.py:5114-5140) and HF's Trainer then leaves where it loaded
    # (trainer.py:498-505): a buffer a tuner makes on the CPU after the load stays there (planner.estimate.boft)
    device_map_load: bool = False
    # the workload kinds whose trainer sets every nn.Dropout's p to 0 before training (TRL's disable_dropout_in_model,
    # v1.9.0 trl/trainer/utils.py:182-185), with where it was read: PEFT's LoRA dropout then returns its input and
    # saves nothing (planner.estimate.lora.dropout_runs); a file's own disable_dropout is the readers'
    zeroes_dropout: dict[str, str] = field(default_factory=dict)

    def precision(self, bf16: bool) -> str:
        """The precision a request that names none runs: bf16 (fp16 where the GPU has no bf16) where this framework
        runs it, else its declared default, else the first it runs (torchtune runs bf16-pure or fp32 alone)."""
        wanted = "bf16" if bf16 else "fp16"
        runs = self.runs.get("precision")
        if not runs or wanted in runs:
            return wanted
        declared = self.defaults.get("precision")
        usable = [p for p in runs if bf16 or "bf16" not in p]
        if declared is not None and declared.value in usable:
            return declared.value
        return (usable or list(runs))[0]
