"""planner/intake's tests: the committed example configurations (tests/data/frameworks/), read with no Hugging Face or
ModelScope cache of this machine in the way (each test sees empty caches)."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "frameworks"
CONFIG_SUFFIXES = (".sh", ".yaml", ".yml", ".json", ".py")
# sourced by other scripts, no training command of its own (test_bad_input checks what reading it says)
HELPERS = {DATA / "scripts" / "VILA" / "scripts" / "setups" / "train.sh"}
# examples that run a tuner or optimizer memplan does not plan (planner.intake.tuners): refused in one line naming it
REFUSED = {
    DATA / "llamafactory/examples/extras/adam_mini/qwen2_full_sft.yaml": "use_adam_mini: True: Adam-mini",
    DATA / "llamafactory/examples/extras/badam/llama3_full_sft.yaml": "use_badam: True: BAdam",
    # an AQLM checkpoint, by its name (planner.model.prequant.unplanned_by_name)
    DATA / "llamafactory/examples/train_qlora/llama3_lora_sft_aqlm.yaml": "is an aqlm checkpoint (as its name says)",
    # LLaMA-Factory files that train nothing (planner.frameworks.llamafactory.reader_launch.not_training)
    DATA / "llamafactory/examples/inference/qwen3.yaml": "infer_backend: huggingface: llamafactory-cli chat's",
    DATA
    / "llamafactory/examples/merge_lora/qwen3_lora_sft.yaml": "export_dir: saves/qwen3_sft_merged: llamafactory-cli",
    DATA / "llamafactory/examples/extras/nlg_eval/llama3_lora_predict.yaml": "do_predict: True: a prediction run",
    # LLaMA-Factory 0.9.5's v1 trainer (planner/frameworks/llamafactory_v1): two files its own parser stops on (no
    # flash_attention2 value), its freeze tuning and Ulysses, and its merge file (no training keys)
    **{
        DATA / f"llamafactory/examples/v1/train_batching_strategy/train_full_fsdp2_{n}.yaml": (
            "flash_attn: flash_attention2: v1 takes eager, sdpa or flash_attention_2"
        )
        for n in ("padding_free", "dynamic_padding_free")
    },
    DATA
    / "llamafactory/examples/v1/train_freeze/train_freeze_sft.yaml": "peft_config.name: freeze: v1's freeze tuning",
    DATA / "llamafactory/examples/v1/train_full/train_full_ulysses_cp.yaml": "dist_config.cp_size: 2: v1's Ulysses",
    DATA / "llamafactory/examples/v1/train_lora/export_lora.yaml": "not a training configuration memplan knows",
    # ms-swift v4.5.2's OPD-RL, GKD beside a colocated vLLM, Megatron-SWIFT and `swift sample` files (issue 49)
    DATA / "swift/examples/yaml/megatron/sft.yaml": "a Megatron-SWIFT configuration",
    DATA / "swift/examples/sampler/sample/sampling.yaml": "`swift sample` arguments",
    # OpenRLHF v0.8.9's AutoTP example: each role's ranks are planned data parallel (reader_flags.refuse_parallel_groups)
    # axolotl's rl ebft: a frozen feature network and generations (planner.frameworks.axolotl.reader REFUSED)
    DATA / "axolotl/examples/ebft/llama-1b-ebft-strided.yaml": "EBFT keeps a frozen feature network",
    DATA / "scripts/OpenRLHF/examples/scripts/train_sft_llama_tensor_parallelism.sh": (
        "--ds_tensor_parallel_size 2: memplan plans no DeepSpeed AutoTP"
    ),
    # axolotl v0.18.0's reward model on a reward checkpoint (its score head already trained): the model is refused
    # (planner/model/catalog/hf_ids.json), not the reward_model key (examples/qwen2/reward-model.yaml plans that)
    DATA / "axolotl/examples/qwen3/reward-model.yaml": "Skywork-Reward-V2-Qwen3-8B': a Bradley-Terry reward model",
}


# frameworks memplan does not read, and commands that train nothing: their examples refused in one line naming them
# (folder -> the test that reads each)
NOT_READ: dict = {DATA / "unread": "tests/planner/intake/test_unread.py"}


def examples() -> list[Path]:
    return sorted(
        p
        for p in DATA.rglob("*")
        if p.suffix in CONFIG_SUFFIXES
        and p not in HELPERS
        and p not in REFUSED
        and not any(p.is_relative_to(d) for d in NOT_READ)
    )


@pytest.fixture(autouse=True)
def _empty_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "ms-cache"))
