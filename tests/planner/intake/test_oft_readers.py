"""OFT read from the configurations of the frameworks that run it (LLaMA-Factory's finetuning_type oft, a script's
PEFT OFTConfig) and written back by LLaMA-Factory's writer; BOFT from a script's BOFTConfig and ms-swift's --tuner_type
boft; OFT's and BOFT's block counts and BOFT's butterfly factors refused in one line."""

import pytest

from planner.errors import BadInput
from tests.planner.intake.test_tuners import SWIFT, _read

LF = "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\ncutoff_len: 1024\nfinetuning_type: oft\n"
SCRIPT = "from peft import {cls}\nfrom trl import SFTConfig\nSFTConfig(max_length=1024)\n{cls}({args})\n"


@pytest.mark.parametrize(
    "name,text,block,targets",
    [
        ("lf.yaml", LF, 32, "all-linear"),  # finetuning_args.py:147, :151 defaults
        ("lf.yaml", LF + "oft_block_size: 16\noft_target: q_proj,v_proj\n", 16, "q_proj,v_proj"),
        ("train.py", SCRIPT.format(cls="OFTConfig", args="oft_block_size=64, target_modules=['q_proj']"), 64, "q_proj"),
        ("train.py", SCRIPT.format(cls="OFTConfig", args="target_modules='all-linear'"), 32, "all-linear"),
    ],
)
def test_oft_is_read_with_its_block_size(tmp_path, name, text, block, targets):
    reading = _read(tmp_path, name, text)
    r = reading.request
    assert (r["lora_variant"], r["lora_rank"], r["lora_targets"]) == ("oft", block, targets)


@pytest.mark.parametrize(
    "name,text,says",
    [
        ("lf.yaml", LF + "module_dropout: 0.1\n", "module_dropout"),
        ("train.py", SCRIPT.format(cls="OFTConfig", args="r=8, oft_block_size=0"), "block count"),
        ("train.py", SCRIPT.format(cls="BOFTConfig", args="boft_n_butterfly_factor=2"), "butterfly factor"),
        ("train.py", SCRIPT.format(cls="BOFTConfig", args="boft_block_size=0, boft_block_num=8"), "block count"),
        ("train.sh", SWIFT + "--tuner_type boft --boft_n_butterfly_factor 2\n", "butterfly factor"),
        ("train.sh", SWIFT + "--tuner_type boft --boft_dropout 0.1\n", "boft_dropout"),
    ],
)
def test_what_oft_plans_not_is_refused_in_one_line(tmp_path, name, text, says):
    with pytest.raises(BadInput) as e:
        _read(tmp_path, name, text)
    assert says in str(e.value) and "not planned" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "name,text,block,targets",
    [
        ("train.py", SCRIPT.format(cls="BOFTConfig", args="target_modules='all-linear'"), 4, "all-linear"),
        (
            "train.py",
            SCRIPT.format(cls="BOFTConfig", args="boft_block_size=16, target_modules=['q_proj']"),
            16,
            "q_proj",
        ),
        ("train.sh", SWIFT + "--tuner_type boft --lora_dropout 0.05\n", 4, "all-linear"),  # tuner_args.py:159
        ("train.sh", SWIFT + "--tuner_type boft --boft_block_size 8 --boft_n_butterfly_factor 1\n", 8, "all-linear"),
    ],
)
def test_boft_is_read_with_its_block_size(tmp_path, name, text, block, targets):
    """ms-swift's BOFT reads no --lora_dropout (its BOFTConfig takes boft_dropout: swift/pipelines/train/tuner.py:307-316)."""
    r = _read(tmp_path, name, text).request
    assert (r["lora_variant"], r["lora_rank"], r["lora_targets"]) == ("boft", block, targets)
    assert r.get("lora_dropout", 0.0) == 0.0


def test_llamafactorys_writer_writes_oft_back_and_reads_it_again(tmp_path):
    """A plan with OFT for --framework llamafactory is written as finetuning_type oft with its block size and reads
    back as the same OFT; the frameworks that do not run OFT refuse it in one line."""
    import yaml

    from planner import advise
    from planner.frameworks.llamafactory import writer

    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 2, "seq_len": 1024, "lora_rank": 16}
    result = advise.check(
        advise.parse(advise.CheckRequest, {**body, "lora_variant": "oft", "framework": "llamafactory"})
    )
    model, hw, goal = result.context
    text = writer.files(result.plan, model, hw, goal.seq_len)[writer.CONFIG_NAME]
    cfg = yaml.safe_load(text)
    assert (cfg["finetuning_type"], cfg["oft_block_size"], cfg["oft_target"]) == ("oft", 16, "all")
    assert "lora_rank" not in cfg
    back = _read(tmp_path, writer.CONFIG_NAME, text).request
    assert (back["lora_variant"], back["lora_rank"]) == ("oft", 16)
    for framework in ("swift", "axolotl"):
        with pytest.raises(BadInput, match="cannot run --lora-variant oft"):
            advise.check(advise.parse(advise.CheckRequest, {**body, "lora_variant": "oft", "framework": framework}))


def test_llamafactorys_writer_writes_oft_under_zero3_and_reads_it_again(tmp_path):
    """OFT under ZeRO-3 (rotations in half, planner.estimate.oft.mode) is written with LLaMA-Factory's DeepSpeed file
    and reads back as the same OFT."""
    import yaml

    from planner import advise, intake
    from planner.frameworks.llamafactory import writer

    body = {"model": "qwen2.5-0.5b", "gpu": "h100", "gpus_per_node": 2, "micro_batch": 2, "seq_len": 1024}
    result = advise.check(
        advise.parse(
            advise.CheckRequest,
            {**body, "lora_rank": 16, "lora_variant": "oft", "zero_stage": 3, "framework": "llamafactory"},
        )
    )
    model, hw, goal = result.context
    files = writer.files(result.plan, model, hw, goal.seq_len)
    cfg = yaml.safe_load(files[writer.CONFIG_NAME])
    assert (cfg["finetuning_type"], cfg["oft_block_size"], cfg["deepspeed"]) == ("oft", 16, "ds_z3_config.json")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    back = intake.read([str(tmp_path / writer.CONFIG_NAME)]).request
    assert (back["lora_variant"], back["lora_rank"], back["zero_stage"]) == ("oft", 16, 3)


def test_swifts_writer_writes_boft_back_and_reads_it_again(tmp_path):
    """A BOFT plan for ms-swift is written as --tuner_type boft with --boft_block_size and --boft_dropout (not
    --lora_rank or --lora_dropout, which its BOFTConfig does not read) and reads back as the same BOFT."""
    from types import SimpleNamespace

    from planner.frameworks.swift.writer import tuner_flags

    plan = SimpleNamespace(
        knobs=SimpleNamespace(release=None),
        lora_rank=8,
        lora_variant="boft",
        lora_dropout=0.0,
        lora_targets="all-linear",
        lora_train_embeddings=False,
        lora_ends="none",
        lora_vision=False,
        quant="none",
    )
    written = dict(tuner_flags(plan, SimpleNamespace(vision=None)))
    assert (written["tuner_type"], written["boft_block_size"], written["boft_dropout"]) == ("boft", 8, 0.0)
    assert "lora_rank" not in written and "lora_dropout" not in written
    flags = " ".join(f"--{k} {' '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in written.items())
    back = _read(tmp_path, "train.sh", SWIFT + flags + "\n").request
    assert (back["lora_variant"], back["lora_rank"]) == ("boft", 8)
