"""Issue 47 item 6 for a length the files set: a cap under per-batch padding (LLaMA-Factory's cutoff_len, ms-swift's
--max_length, TRL's max_length: Runs.pads_per_batch) is planned at the cap, the worst case, and where that does not fit
the check says the longest rows that do (planner.checkconfig.capped_length); packed rows each cost the cap: no line."""

from pathlib import Path

from planner import checkconfig
from planner.cli.check import capped_length_line

SFT = """model_name_or_path: meta-llama/Meta-Llama-3.1-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
lora_rank: 16
cutoff_len: 2048
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
bf16: true
template: llama3
dataset: alpaca_en_demo
output_dir: saves/out
"""
# the lf-7197 field run's shape (tests/field/lf-7197-llama31-8b-lora-ddp-7x4090), on one 4090
FLAGS = {"gpu": "rtx4090", "gpus_per_node": 1}


def _check(tmp_path: Path, text: str, **flags):
    path = tmp_path / "train.yaml"
    path.write_text(text)
    return checkconfig.check_config([str(path)], {**FLAGS, **flags})


def test_a_capped_sft_length_that_does_not_fit_says_the_longest_rows_that_do(tmp_path):
    out = _check(tmp_path, SFT)
    c = out.capped_length
    assert not out.plan.fits and out.context[2].seq_len == 2048  # the verdict stays the cap's
    assert (c["cap"], c["key"], c["field"]) == (2048, "cutoff_len", "seq_len") and 0 < c["fits_up_to_tokens"] < 2048
    assert "train/sft/workflow.py:62-65" in c["padding"]
    n = c["fits_up_to_tokens"]
    # rows padded up to a multiple of 8 (pad_to_multiple_of: Runs.pad_multiple): a row of n + 1 costs n + 8
    assert n % 8 == 0
    at_n, past_n = _check(tmp_path, SFT, seq_len=n), _check(tmp_path, SFT, seq_len=n + 8)
    assert at_n.plan.fits and not past_n.plan.fits
    assert past_n.capped_length is None  # the flag sets the length: the user's, no cap left to the data
    line = capped_length_line(c)
    assert line == (
        f"cutoff_len 2,048 is a cap (each micro-batch padded to its longest row): does not fit rows of the full "
        f"2,048 tokens; fits rows up to {n:,} tokens: your data decides, --data reads it"
    )


def test_packed_rows_each_cost_the_cap_so_no_line(tmp_path):
    out = _check(tmp_path, SFT + "packing: true\n")
    assert not out.plan.fits and out.plan.knobs.batching == "packed" and out.capped_length is None


def test_a_capped_dpo_row_is_searched_as_the_limits_line_searches_it(tmp_path):
    """The lf-3716 field run's shape: DPO pairs cut at cutoff_len 1024, a row the longest of chosen and rejected."""
    dpo = SFT.replace("stage: sft", "stage: dpo").replace("cutoff_len: 2048", "cutoff_len: 1024")
    out = _check(tmp_path, dpo)
    c = out.capped_length
    assert not out.plan.fits and out.plan.workload.max_length == c["cap"] == 1024
    limit = out.limits["length_fits_up_to"]
    assert c["field"] == "workload.max_length" and c["fits_up_to_tokens"] == limit - limit % 8 > 0
    n = c["fits_up_to_tokens"]
    assert _check(tmp_path, dpo, workload={"max_length": n}).plan.fits
    assert not _check(tmp_path, dpo, workload={"max_length": n + 8}).plan.fits
    assert capped_length_line(c).endswith("your data decides, --max-length plans a shorter cap")


def test_no_line_where_the_cap_fits(tmp_path):
    out = _check(tmp_path, SFT, gpu="h100")
    assert out.plan.fits and out.capped_length is None


def test_where_no_row_length_fits_the_line_says_the_data_cannot_help():
    o = {"fits_up_to_tokens": 0, "cap": 8192, "key": "--max_length", "field": "seq_len"}
    head = "--max_length 8,192 is a cap (each micro-batch padded to its longest row): no row"
    assert capped_length_line(o) == head + " fits at any length: shorter rows cannot make it fit"
    held = capped_length_line(o | {"image_tokens": 1280})
    assert held == head + " holding its 1,280 image tokens fits at any length: shorter rows cannot make it fit"


RUNS = {  # one launch line each, on one 4090: ms-swift's and TRL's collators pad per batch, a plain script's decides
    "swift": ("swift sft --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --max_length 8192", "--max_length"),
    "trl": ("trl sft --model_name_or_path Qwen/Qwen2.5-7B-Instruct --use_peft --max_length 8192", "--max_length"),
    "hf": ("python train.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct --max_length 8192 --bf16 true", None),
}


def test_ms_swift_and_trl_lengths_are_caps_a_plain_scripts_is_not(tmp_path):
    for name, (line, key) in RUNS.items():
        script = tmp_path / f"{name}.sh"
        script.write_text(f"CUDA_VISIBLE_DEVICES=0 {line} --per_device_train_batch_size 4 --output_dir o\n")
        flags = {"gpu": "rtx4090", **({"framework": "trl@1.6"} if name == "trl" else {})}
        out = checkconfig.check_config([str(script)], flags)
        assert out.config["framework"] == name and not out.plan.fits, name
        assert (out.capped_length or {}).get("key") == key and (key is None or out.capped_length["cap"] == 8192), name


def test_brief_says_the_condition_too(tmp_path, capsys, monkeypatch):
    """`check --brief` carries the verdict's condition on the rows' length, as the full output does."""
    from planner.cli import main

    monkeypatch.setenv("MEMPLAN_STORE", str(tmp_path / "none.sqlite"))
    path = tmp_path / "train.yaml"
    path.write_text(SFT)
    assert main(["check", "--config", str(path), "--gpu", "rtx4090", "--gpus-per-node", "1", "--brief"]) == 3  # no fit
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("cutoff_len 2,048 is a cap") for line in lines) == 1, lines


# OpenRLHF's train_sft pads a micro-batch to its longest row (zero_pad_sequences): --max_len is a cap; with
# --packing_samples the rows are packed, planned as micro rows of max_len, each costing the cap
ORL_SFT = """deepspeed --module openrlhf.cli.train_sft \\
   --pretrain meta-llama/Meta-Llama-3.1-8B-Instruct \\
   --train_batch_size 64 \\
   --micro_train_batch_size 8 \\
   --max_len 8192 \\
   --zero_stage 2 \\
   --bf16 \\
   --flash_attn
"""


def _check_script(tmp_path: Path, text: str):
    path = tmp_path / "train_sft.sh"
    path.write_text(text)
    return checkconfig.check_config([str(path)], {"gpu": "h100", "gpus_per_node": 8})


def test_openrlhfs_sft_length_is_a_cap(tmp_path):
    out = _check_script(tmp_path, ORL_SFT)
    c = out.capped_length
    assert not out.plan.fits and out.context[2].seq_len == 8192
    assert (c["cap"], c["field"]) == (8192, "seq_len") and 0 < c["fits_up_to_tokens"] < 8192
    assert "sft_dataset.py:215-227" in c["padding"]
    assert c["key"] == "--max_len"  # as the script spells it (0.10.1's flat flag), not its dotted 0.11 name


def test_openrlhfs_packed_sft_rows_each_cost_the_cap(tmp_path):
    out = _check_script(tmp_path, ORL_SFT.replace("--flash_attn", "--flash_attn \\\n   --packing_samples"))
    assert not out.plan.fits and out.capped_length is None


AXOLOTL = """base_model: meta-llama/Meta-Llama-3.1-8B-Instruct
adapter: lora
lora_r: 16
lora_alpha: 32
lora_target_linear: true
sequence_len: 8192
micro_batch_size: 8
gradient_accumulation_steps: 1
bf16: true
flash_attention: true
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
output_dir: ./out
"""


def _check_axolotl(tmp_path: Path, text: str, **flags):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return checkconfig.check_config([str(path)], {"gpu": "h100", **flags})


def test_axolotls_sequence_len_is_a_cap_in_multiples_of_64(tmp_path):
    out = _check_axolotl(tmp_path, AXOLOTL)
    c = out.capped_length
    assert not out.plan.fits and (c["cap"], c["key"], c["field"]) == (8192, "sequence_len", "seq_len")
    n = c["fits_up_to_tokens"]
    assert 0 < n < 8192 and n % 64 == 0 and "core/builders/causal.py:383-395" in c["padding"]
    assert _check_axolotl(tmp_path, AXOLOTL, seq_len=n).plan.fits
    assert not _check_axolotl(tmp_path, AXOLOTL, seq_len=n + 64).plan.fits


def test_axolotl_padding_every_row_to_sequence_len_gives_no_line(tmp_path):
    out = _check_axolotl(tmp_path, AXOLOTL + "pad_to_sequence_len: true\n")
    assert not out.plan.fits and out.capped_length is None
