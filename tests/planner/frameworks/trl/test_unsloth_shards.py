"""unsloth on several GPUs (planner.frameworks.trl.releases UNSLOTH_SHARDS): unsloth 2026.8.19 runs them as DDP, each
rank loading the whole model (unsloth/models/loader.py:477-484), and has no FSDP or ZeRO-3 path; it refuses neither
(tokenizer_utils.py:1706-1712's raise is never called). So `suggest --framework trl@unsloth` ranks no FSDP or ZeRO-3
plan, and a user's unsloth script launched under FSDP or ZeRO-3 reads with one line saying so. The script is unsloth's
Alpaca notebook as published; the launchers and configs are the ones unsloth's DDP guide and accelerate's `accelerate
config` write."""

import shutil

import pytest

from planner import advise, intake
from planner.config.requests import SuggestRequest
from planner.errors import BadInput
from planner.frameworks import BUNDLED
from tests.planner.frameworks.trl.test_unsloth import ALPACA

BODY = {"model": "llama-3.1-8b", "gpu": "h100", "gpus_per_node": 4, "global_batch": 32, "seq_len": 4096}
# `accelerate config` answers for FSDP2 on one node of four GPUs
FSDP2 = """compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: true
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_version: 2
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
use_cpu: false
"""
FSDP1 = FSDP2.replace("  fsdp_version: 2\n", "").replace(
    "fsdp_reshard_after_forward: true", "fsdp_sharding_strategy: 1"
)
ZERO3 = """{
  "bf16": {"enabled": "auto"},
  "zero_optimization": {"stage": 3, "overlap_comm": true, "stage3_gather_16bit_weights_on_model_save": true},
  "gradient_accumulation_steps": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "train_batch_size": "auto"
}
"""
LAUNCH = {
    "ddp": ("torchrun --nproc_per_node 4 train.py\n", None),
    "fsdp2": ("accelerate launch --config_file fsdp.yaml train.py\n", ("fsdp.yaml", FSDP2)),
    "fsdp1": ("accelerate launch --config_file fsdp.yaml train.py\n", ("fsdp.yaml", FSDP1)),
    "zero3": (
        "accelerate launch --num_processes 4 --use_deepspeed --deepspeed_config_file ds.json train.py\n",
        ("ds.json", ZERO3),
    ),
}


def _files(tmp_path, how: str) -> list[str]:
    """The launcher first, as a user posts it, then its config and the script it runs."""
    shutil.copy(ALPACA, tmp_path / "train.py")
    (tmp_path / "run.sh").write_text(LAUNCH[how][0])
    files = [str(tmp_path / "run.sh")]
    if LAUNCH[how][1] is not None:
        name, text = LAUNCH[how][1]
        (tmp_path / name).write_text(text)
        files.append(str(tmp_path / name))
    return [*files, str(tmp_path / "train.py")]


def _sharded(plans) -> list:
    return [p for p in plans if p.knobs.fsdp != "off" or p.knobs.zero_stage == 3]


def test_suggest_under_unsloth_ranks_no_fsdp_or_zero3_plan():
    """The same request under TRL 0.22 (the release unsloth's notebooks pin) ranks sharded plans first."""
    plain = advise.suggest(advise.parse(SuggestRequest, {**BODY, "framework": "trl@0.22"}), with_nearest=False).plans
    plans = advise.suggest(advise.parse(SuggestRequest, {**BODY, "framework": "trl@unsloth"}), with_nearest=False).plans
    assert _sharded(plain) and plans and not _sharded(plans)
    assert {p.knobs.zero_stage for p in plans} <= {0, 1, 2}


@pytest.mark.parametrize("first", ["run.sh", "train.py"])
def test_a_ddp_launch_of_an_unsloth_script_reads_as_unsloth_whatever_the_order(tmp_path, first):
    """torchrun names no trainer and the script's name none either: the script's own reading leads (it was HF's
    Trainer at release "unsloth", a refusal, with the launcher given first)."""
    files = sorted(_files(tmp_path, "ddp"), key=lambda f: not f.endswith(first))
    r = intake.read(files)
    assert r.request["framework"] == "trl@unsloth" and r.request["gpus_per_node"] == 4
    assert not any("runs several GPUs as DDP" in line for line in r.unplanned)


@pytest.mark.parametrize("how", ["fsdp2", "zero3"])
def test_an_unsloth_script_under_fsdp2_or_zero3_is_one_line(tmp_path, how):
    r = intake.read(_files(tmp_path, how))
    lines = [line for line in r.unplanned if "runs several GPUs as DDP" in line]
    assert len(lines) == 1 and "unsloth 2026.8.19" in lines[0] and "loader.py:477-484" in lines[0]
    assert r.request["framework"] == BUNDLED  # planned as the bundled trainer runs it (settle._framework)


def test_an_unsloth_script_under_fsdp1_is_refused_with_unsloths_own_storage(tmp_path):
    """FSDP1 (accelerate's default fsdp_version) cannot flatten unsloth's uint8-packed 4-bit base: refused, citing
    unsloth's BitsAndBytesConfig (not TRL's ModelConfig) and its DDP line, not "fsdp_version 2"."""
    with pytest.raises(BadInput) as e:
        intake.read(_files(tmp_path, "fsdp1"))
    assert "models/llama.py:2620-2626" in str(e.value) and "runs several GPUs as DDP" in str(e.value)
    assert "fsdp_version 2" not in str(e.value)
