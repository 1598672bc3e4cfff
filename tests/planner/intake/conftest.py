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
    DATA / "swift/examples/train/multimodal/lora_llm_full_vit/sft.sh": "--tuner_type lora_llm: LoRA on the language",
    # OpenRLHF v0.8.9's AutoTP example: each role's ranks are planned data parallel (reader_flags.refuse_parallel_groups)
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
