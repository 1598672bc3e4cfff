"""TRL's forks as release lines of TRL (planner.frameworks.trl re-exports FORKS): the GRPO forks that froze an early
TRL (R1-V, VLM-R1: their own trainers, entry scripts and flags) and unsloth over TRL's trainers; each Release with its
defaults and meanings read at the fork's commit. Moved out of releases.py (stop 71), whose 0.14 line they share."""

from planner.frameworks.base import Default, Release, Rule
from planner.frameworks.trl.releases import FORKED_014, FP32, HYBRID_FULL, PROMPTS, TRANSFORMERS_4, ZERO

# the forks' own trainers compute their loss themselves: no Liger (no `liger` in either repository's src/)
FORK = {**ZERO, "runs": {**ZERO["runs"], "loss": ("standard",)}}
VLM_R1 = "VLM-R1 90052f4 src/open-r1-multimodal"

FORKS = (
    Release(
        "r1-v",
        None,
        "R1-V bbbbe3d src/r1-v (setup.py:65 trl==0.14.0; src/open_r1/trainer/grpo_trainer.py:63 Qwen2VLGRPOTrainer, "
        ":285 num_return_sequences=num_generations, :424 each prompt repeated); VLM-R1 before 4081ec3 (78ebe40 "
        "grpo_trainer.py:62,285,449) the same",
        notes=(PROMPTS + " (Qwen2VLGRPOTrainer)",),
        aliases=("qwen2vl-grpo",),
        **{**FORKED_014, "adapter": FORK},
    ),
    Release(
        "vlm-r1",
        None,
        f"{VLM_R1} (setup.py:65-66 transformers==4.49.0, trl==0.17.0; its own GRPOConfig and VLMGRPOTrainer, "
        "src/open_r1/trainer/grpo_trainer.py:119, counting completions: :414-423, 849-856)",
        defaults={
            "checkpointing": Default(
                "off",
                f"{VLM_R1}/src/open_r1/trainer/grpo_config.py:22: GRPOConfig(TrainingArguments), "
                "transformers 4.49.0 training_args.py:1374-1375 gradient_checkpointing=False",
            ),
            "optimizer": FORKED_014["defaults"]["optimizer"],
            "precision": Default("fp32", f"{VLM_R1}/src/open_r1/trainer/grpo_config.py:22: {FP32.source}"),
        },
        meaning={**TRANSFORMERS_4, **HYBRID_FULL},
        workload={
            "beta": Default(0.04, f"{VLM_R1}/src/open_r1/trainer/grpo_config.py:291-292: beta=0.04"),
            "max_completion_length": Default(256, f"{VLM_R1}/src/open_r1/trainer/grpo_config.py:177-178: 256"),
            "logprobs": Default(
                "full", f"{VLM_R1}/src/open_r1/trainer/grpo_trainer.py:497-507: the whole logits, a log_softmax a row"
            ),
        },
        adapter=FORK,
        aliases=("vlmgrpo",),
    ),
)
# the flags a fork's GRPO entry script requires that no plan sets (planner.export.commands writes them): TRL's
# ScriptArguments.dataset_name has no default (trl v0.14.0 trl/scripts/utils.py:53, v0.17.0 :54) and R1-V's grpo.py
# (bbbbe3d :29-30) and VLM-R1's grpo_jsonl.py (90052f4 :64-65) subclass it, so their TrlParser refuses a command without
# it; VLM-R1 reads its rows from --data_file_paths and --image_folders (grpo_jsonl.py:946-947, None.split otherwise) and
# its own scripts pass `--dataset-name this_is_not_used` (run_scripts/run_grpo_rec.sh)
FORK_SCRIPT_FLAGS = {
    "r1-v": ("--dataset_name", "YOUR_DATASET"),
    "vlm-r1": ("--dataset_name", "unused", "--data_file_paths", "YOUR_DATA.jsonl", "--image_folders", "YOUR_IMAGES"),
}
# a fork's GRPO entry script, from the repository's root (its own run scripts `cd` to the package and run the path
# below it: R1-V bbbbe3d src/r1-v/run_grpo.sh:1,13; VLM-R1 90052f4 run_scripts/run_grpo_rec.sh:14,30), so that the
# written command runs the fork's script and a reading of it (FORK_PATHS) knows the fork
FORK_ENTRY = {"r1-v": "src/r1-v/src/open_r1/grpo.py", "vlm-r1": "src/open-r1-multimodal/src/open_r1/grpo_jsonl.py"}
# the pixel bounds each image is resized within, GRPOScriptArguments' own flags (R1-V grpo.py:43-50, VLM-R1
# grpo_jsonl.py:89-96; the trainers set them on the Qwen-VL processor): unwritten, each image may reach 12,845,056
FORK_PIXELS = ("--min_pixels", "--max_pixels")
# an InternVL image's tile cap, VLM-R1's own flag (grpo_jsonl.py:97-100 max_anyres_num, default 12, which its InternVL
# module passes as max_num: vlm_modules/internvl_module.py:66-67,95); R1-V trains Qwen-VL models only
FORK_TILES = {"vlm-r1": "--max_anyres_num"}


def grpo_fork(framework: str, release: str | None, kind: str) -> str | None:
    """The GRPO fork (trl@r1-v, trl@vlm-r1) whose own entry script (FORK_ENTRY) runs a plan of this framework,
    release and workload kind, or None."""
    return release if framework == "trl" and kind == "grpo" and release in FORK_ENTRY else None


def fork_script_flags(framework: str, release: str | None, kind: str) -> tuple[str, ...]:
    """The flags a GRPO fork's own parser requires beside the plan's (FORK_SCRIPT_FLAGS); none for any other plan."""
    return tuple(FORK_SCRIPT_FLAGS.get(release, ())) if framework == "trl" and kind == "grpo" else ()


# unsloth (planner.frameworks.trl.reader_unsloth) runs TRL's trainers on its own model: its checkpointing offloads
# each layer's input to the host; its own loss kernels are not modelled, so the loss is planned from the full logits
UNSLOTH = "unsloth 2026.8.19 (unslothai/unsloth 015bdef0d9)"
# Several GPUs: unsloth runs them as DDP, each rank loading the whole model onto its own GPU (models/loader.py:477-484,
# loader_utils.py:91-105 device_map {"": cuda:LOCAL_RANK}; llama.py:2905-2908 only warns that the batch multiplies).
# It has no FSDP or ZeRO-3 path and refuses neither: its old "does not support multi GPU setups" raise
# (tokenizer_utils.py:1706-1712) sits in patch_sft_trainer_tokenizer, whose one call is commented out (:1780). Its
# LoRA kernels read each projection's base weight, its quant_state and the LoRA A/B weights directly from the decoder
# layer's patched forward (kernels/utils.py:335-392 get_lora_parameters), which ZeRO-3 leaves partitioned (gathered in
# that projection's own forward only) and FSDP2 unshards into plain Parameters without Params4bit's quant_state (the
# two failures axolotl PR #2992 patched for its own kernels); its 4-bit base is packed in uint8 (models/llama.py:
# 2620-2626 sets no bnb_4bit_quant_storage), which FSDP1 cannot flatten beside the bf16 weights. ZeRO-1 and 2 keep
# whole weights on every rank, as DDP does.
UNSLOTH_SHARDS = (
    f"{UNSLOTH} runs several GPUs as DDP, the whole model on each rank (unsloth/models/loader.py:477-484); it has no "
    "FSDP or ZeRO-3 path (its LoRA kernels read the base weight, quant_state and LoRA weights unsharded: "
    "kernels/utils.py:335-392) and refuses neither: give --fsdp off and --zero 0, 1 or 2"
)
FORKS += (
    Release(
        "unsloth",
        None,
        f"{UNSLOTH}: FastLanguageModel / FastVisionModel over TRL's patched trainers (unsloth/models/rl.py)",
        defaults={
            "checkpointing": Default(
                "offload-inputs", f"{UNSLOTH} unsloth/models/llama.py:3079: use_gradient_checkpointing='unsloth'"
            ),
            "seq_len": Default(2048, f"{UNSLOTH} unsloth/models/loader.py:412: max_seq_length=2048"),
        },
        notes=("unsloth over TRL: layer inputs offloaded to the host; its own kernels and loss are not planned",),
        rules=(
            Rule("fsdp", UNSLOTH_SHARDS, lambda k: k.get("fsdp", "off") != "off"),
            Rule("zero_stage", UNSLOTH_SHARDS, lambda k: k.get("zero_stage", 0) == 3),
        ),
        adapter={
            **ZERO,
            # use_gradient_checkpointing "unsloth" keeps each layer's input on the host (reader_unsloth), not every
            # saved tensor: offload-inputs, never offload
            "runs": {**ZERO["runs"], "checkpointing": ("off", "full", "offload-inputs"), "loss": ("standard",)},
        },
    ),
)
