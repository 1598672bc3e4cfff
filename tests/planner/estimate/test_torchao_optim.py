"""torchao's low-bit AdamW (planner.estimate.torchao_optim), fast and without torch or torchao: the term against the
bytes torchao 0.18.0 kept after two real CPU steps of the 2-layer Llama in tests/probes/test_torchao_optim.py (which
measures them again in the sweep tier, where torchao is installed: its docstring gives the command), how the
frameworks' optim names are read and written, and the lines whose transformers predates them. Exact."""

import pytest

from planner import advise
from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.estimate import state_terms
from planner.estimate.setup import Setup
from planner.estimate.torchao_optim import torchao_low_bit_state_bytes
from planner.estimate.trained import trainable_tensor_sizes
from planner.frameworks.hf.keys import HF_OPTIM
from planner.intake import vocab
from planner.model.families import from_config

TINY = {  # a 2-layer Llama that tests/probes/test_torchao_optim.py and test_matrix_optim.py step
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 64,
    "intermediate_size": 176,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}
# torchao 0.18.0 on torch 2.13 (CPU), two steps, the states' inner storage (codes + scale + qmap; zeros_like below 4096)
MEASURED = {
    ("adamw-torchao-4bit", 256, 4): 223808,
    ("adamw-torchao-4bit", 256, 2): 189760,
    ("adamw-torchao-4bit", 128, 4): 228480,
    ("adamw-torchao-4bit", 128, 2): 194432,
    ("adamw-torchao-8bit", 256, 4): 396352,
    ("adamw-torchao-8bit", 256, 2): 362304,
}


def _setup(**knobs) -> Setup:
    return Setup(from_config(TINY, "tiny-llama"), Knobs(framework="hf", **knobs), 1, 1, 16)


@pytest.mark.parametrize("key", MEASURED)
def test_the_term_is_torchaos_measured_state_bytes(key):
    optimizer, block, nbytes = key
    assert torchao_low_bit_state_bytes(optimizer, trainable_tensor_sizes(_setup()), nbytes, block) == MEASURED[key]


def test_the_plan_counts_the_block_transformers_5_passes_in_the_weights_dtype():
    for optimizer in ("adamw-torchao-4bit", "adamw-torchao-8bit"):
        assert state_terms.optimizer_bytes(_setup(optimizer=optimizer, precision="fp32")) == MEASURED[optimizer, 256, 4]
        assert (
            state_terms.optimizer_bytes(_setup(optimizer=optimizer, precision="bf16-pure"))
            == MEASURED[optimizer, 256, 2]
        )


def test_hf_optim_names_read_and_write_as_torchao_not_bitsandbytes():
    """transformers 5.25 training_args.py:124-125; adamw_torch_8bit is torchao's AdamW8bit, not bitsandbytes'."""
    for name, ours in (("adamw_torch_4bit", "adamw-torchao-4bit"), ("adamw_torch_8bit", "adamw-torchao-8bit")):
        assert vocab.optimizer(name) == ours
        assert HF_OPTIM[ours] == name
    assert vocab.optimizer("adamw_bnb_8bit") == "adamw-8bit"


@pytest.mark.parametrize(
    "framework,optimizer,added",
    [("llamafactory@0.8", "adamw-torchao-4bit", "4.45.0"), ("trl@0.14", "adamw-torchao-8bit", "4.49.0")],
)
def test_a_line_on_an_older_transformers_refuses_the_optim(framework, optimizer, added):
    def check(fw: str):
        fields = {"model": "llama-3.1-8b", "gpu": "h100", "micro_batch": 1, "seq_len": 1024, "lora_rank": 16}
        return advise.check(advise.parse(advise.CheckRequest, fields | {"framework": fw, "optimizer": optimizer}))

    with pytest.raises(BadInput) as e:
        check(framework)
    assert f"added in transformers {added}" in str(e.value) and "\n" not in str(e.value)
    assert check(framework.split("@")[0])  # the newest line runs it


@pytest.mark.parametrize(
    "framework,optimizer",
    [("llamafactory", "adamw-torchao-4bit"), ("swift", "adamw-torchao-8bit"), ("axolotl", "adamw-torchao-4bit")],
)
def test_the_optim_is_written_and_read_back(framework, optimizer, tmp_path):
    """Each writer writes transformers' name (optim / optimizer), each reader reads it back as the same plan."""
    from tests.planner.intake.test_round_trip import written_and_read_back

    body = {"model": "qwen2.5-7b", "gpu": "h100", "gpus_per_node": 1, "micro_batch": 1, "grad_accum": 4}
    body |= {"seq_len": 2048, "framework": framework, "lora_rank": 16, "quant": "nf4", "optimizer": optimizer}
    res, files, _, back = written_and_read_back(body, tmp_path)
    assert TORCHAO_NAME[optimizer] in "".join(files.values())
    assert back.plan.knobs.optimizer == optimizer == res.plan.knobs.optimizer


TORCHAO_NAME = {"adamw-torchao-4bit": "adamw_torch_4bit", "adamw-torchao-8bit": "adamw_torch_8bit"}
