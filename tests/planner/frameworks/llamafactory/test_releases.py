"""LLaMA-Factory's releases as the reading plans them (planner/frameworks/llamafactory/__init__.py RELEASES, read at
each tag of hiyouga/LLaMA-Factory): the entry point (src/train_bash.py to v0.7.0, src/train.py from v0.7.1) read with
its flags as LLaMA-Factory and narrowing the release, pins of llamafactory or its old name llmtuner, keys only some
releases take, the keys renamed since (dpo_beta, sft_packing, image_resolution, flash_attn's values), and each
line's defaults (cutoff_len, lora_target, the optimizer its transformers pin runs, the image cap)."""

import shutil
from pathlib import Path

import pytest

from planner import checkconfig, intake
from planner.cli import main
from planner.errors import BadInput

FIELD = Path(__file__).resolve().parents[3] / "field"
BASH = (
    "CUDA_VISIBLE_DEVICES=0 python src/train_bash.py --stage sft --do_train --model_name_or_path Qwen/Qwen2.5-7B "
    "--dataset alpaca --template qwen --finetuning_type lora {extra} --output_dir out "
    "--per_device_train_batch_size 2 --fp16\n"
)
YAML = "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: lora\nlora_target: all\n{extra}\n"


def _read(tmp_path: Path, text: str, name: str = "train.sh", pins: str = "", **given):
    if pins:
        (tmp_path / "requirements.txt").write_text(pins)
    path = tmp_path / name
    path.write_text(text)
    return intake.read([str(path)], given=given or None)


def _s(reading) -> dict:
    return {s.field: s for s in reading.settings}


def test_train_bash_with_its_flags_is_llamafactory_at_a_train_bash_release(tmp_path):
    """Read as LLaMA-Factory, not as a plain HF Trainer: LoRA on lora_target, its checkpointing, cutoff_len 1024 of
    every train_bash.py release (v0.7.0 data_args.py:27-28), adamw_torch of the transformers they ran."""
    r = _read(tmp_path, BASH.format(extra="--lora_target q_proj,v_proj"))
    s = _s(r)
    assert s["framework"].value == "llamafactory@0.7"  # v0.7.0, the last train_bash.py release
    assert "release assumed: LLaMA-Factory 0.7, the newest of 0.5, 0.6, 0.7" in s["framework"].source
    assert "train_bash.py" in s["framework"].source
    assert r.request["lora_rank"] == 8 and r.request["lora_targets"] == "q_proj,v_proj"
    assert r.request["checkpointing"] == "full" and r.request["micro_batch"] == 2
    assert r.request["seq_len"] == 1024 and "v0.7.0 src/llmtuner/hparams/data_args.py:27-28" in s["seq_len"].source
    assert r.request["optimizer"] == "adamw"
    assert r.releases == ("0.5", "0.6", "0.7")  # check --config plans each, the headline the hungrier


def test_a_pinned_llmtuner_decides_and_lora_without_lora_target_stops_at_05(tmp_path):
    r = _read(tmp_path, BASH.format(extra=""), pins="llmtuner==0.5.3\n")
    s = _s(r)
    assert s["framework"].value == "llamafactory@0.5" and "requirements.txt:1 llmtuner==0.5.3" in s["framework"].source
    assert any("LLaMA-Factory 0.5 stops without lora_target" in u for u in r.unplanned)
    assert r.request["lora_targets"] == "all-linear" and "parser.py:141-142" in s["lora_targets"].source
    assert not r.releases
    newer = _read(tmp_path, BASH.format(extra=""), pins="llmtuner==0.6.1\n")
    assert _s(newer)["framework"].value == "llamafactory@0.6"
    assert "finetuning_args.py:81" in _s(newer)["lora_targets"].source  # "all" by default from v0.6.0
    assert not any("stops without lora_target" in u for u in newer.unplanned)


def test_a_llamafactory_pin_beside_a_yaml_decides_the_cutoff(tmp_path):
    """cutoff_len 1024 through v0.9.0, 2048 from v0.9.1 (data_args.py:44-45 at v0.9.0, :48-49 at v0.9.1)."""
    old = _read(tmp_path, YAML.format(extra=""), "train.yaml", pins="llamafactory==0.9.0\n")
    assert _s(old)["framework"].value == "llamafactory@0.8" and old.request["seq_len"] == 1024
    assert "v0.9.0 src/llamafactory/hparams/data_args.py:44-45" in _s(old)["seq_len"].source
    new = _read(tmp_path, YAML.format(extra=""), "train.yaml", pins="llamafactory==0.9.1\n")
    assert _s(new)["framework"].value == "llamafactory@0.9.1" and new.request["seq_len"] == 2048


def test_the_optimizer_follows_the_transformers_each_release_pins(tmp_path):
    """adamw_torch (foreach) under the pins of v0.9.3 (<=4.52.4); adamw_torch_fused under v0.9.4's (4.51-4.57.1,
    which pip resolves to 4.57.1) and v0.9.5's >=4.55."""
    for pin, optimizer in (("0.9.3", "adamw"), ("0.9.4", "adamw-fused"), ("0.9.5", "adamw-fused")):
        r = _read(tmp_path, YAML.format(extra=""), "train.yaml", pins=f"llamafactory=={pin}\n")
        assert r.request["optimizer"] == optimizer, pin


def test_a_transformers_pin_beside_the_files_decides_the_optimizer(tmp_path):
    """v0.9.4 takes transformers 4.51.0-4.57.1 (pyproject.toml:44): a pin of 4.51.3 beside the YAML runs adamw_torch
    (fused only from 4.54: transformers 4.54.0 training_args.py:1286-1291), the source naming the pin; unpinned,
    pip's 4.57.1 runs adamw_torch_fused, the source saying memplan assumed it (Release.transformers). A default the
    line did not move names the line, as at the newest (line_defaults.restate)."""
    pinned = _read(tmp_path, YAML.format(extra=""), "train.yaml", pins="llamafactory==0.9.4\ntransformers==4.51.3\n")
    opt = _s(pinned)["optimizer"]
    assert opt.value == "adamw" and "transformers==4.51.3" in opt.source, opt
    assert opt.source.startswith("llamafactory@0.9.4 default optim adamw_torch"), opt.source
    bare = _read(tmp_path, YAML.format(extra=""), "train.yaml", pins="llamafactory==0.9.4\n")
    opt = _s(bare)["optimizer"]
    assert opt.value == "adamw-fused" and "transformers assumed 4.57.1" in opt.source, opt
    assert _s(bare)["seq_len"].source.startswith("llamafactory@0.9.4 default, as at llamafactory 0.9.5: cutoff_len")


def test_the_keys_older_releases_named_are_read_in_their_newest_names(tmp_path):
    """sft_packing (to v0.5.3) is packing; dpo_beta (to v0.7.1) is pref_beta; flash_attn True (to v0.6.3) is
    FlashAttention-2; the keys narrow the releases the file allows."""
    r = _read(tmp_path, YAML.format(extra="sft_packing: true\nflash_attn: true\ncutoff_len: 512"), "train.yaml")
    s = _s(r)
    assert s["framework"].value == "llamafactory@0.5" and "sft_packing" in s["framework"].source
    assert r.request["batching"] == "packed" and r.request["attention"] == "flash"
    assert not any("refuses it" in u for u in r.unplanned)
    dpo = _read(tmp_path, YAML.format(extra="stage: dpo\ndpo_beta: 0.1\ncutoff_len: 512"), "train.yaml")
    assert _s(dpo)["framework"].value == "llamafactory@0.7.1" and dpo.releases == ("0.5", "0.6", "0.7", "0.7.1")
    assert not any("refuses it" in u for u in dpo.unplanned)
    given = _read(tmp_path, YAML.format(extra="sft_packing: true"), "train.yaml", framework="llamafactory@0.9.5")
    assert any("sft_packing: True (not a llamafactory 0.9.5 key" in u for u in given.unplanned)


@pytest.mark.parametrize(
    ("extra", "attention"),
    [("flash_attn: false", "eager"), ("flash_attn: true", "flash"), ("", "eager"), ("flash_attn: off", "eager")],
)
def test_flash_attn_false_at_the_bool_lines_is_eager(tmp_path, extra, attention):
    """flash_attn False at v0.5.3 (its default, model_args.py:56-59) set attn_implementation "eager"
    (src/llmtuner/model/patcher.py:105-114; v0.6.3 patcher.py:64-76 the same), never transformers' sdpa: a 0.5 file
    (sft_packing names the line) reads False or no flash_attn as eager, True as FlashAttention-2, and 0.7.x's "off"
    as eager too (keys.py OLD_FLASH_ATTN, the writer's table, read back)."""
    r = _read(tmp_path, YAML.format(extra=f"sft_packing: true\n{extra}"), "train.yaml")
    assert _s(r)["framework"].value == "llamafactory@0.5" and r.request["attention"] == attention


def test_v090s_image_resolution_is_the_longer_side_and_v091s_the_pixels(tmp_path):
    """image_resolution: the longer side at v0.9.0 (data/mm_plugin.py:58-60), pixels at v0.9.1 (model_args.py:61-62);
    unset, 512 x 512 in both; image_max_pixels 768 x 768 from v0.9.2."""
    text = "model_name_or_path: Qwen/Qwen2.5-VL-7B-Instruct\nstage: sft\nfinetuning_type: lora\ncutoff_len: 4096\n"
    side = _read(tmp_path, text + "image_resolution: 448\n", "t.yaml", framework="llamafactory@0.9.0")
    assert side.request["image_tokens"] == 448 * 448 // 784
    pixels = _read(tmp_path, text + "image_resolution: 200704\n", "t.yaml", framework="llamafactory@0.9.1")
    assert pixels.request["image_tokens"] == 200704 // 784
    for release, cap in (("0.9.0", 512 * 512), ("0.9.1", 512 * 512), ("0.9.2", 768 * 768)):
        r = _read(tmp_path, text, "t.yaml", framework=f"llamafactory@{release}")
        assert r.request["image_tokens"] == cap // 784, release


def test_the_field_runs_read_at_their_old_releases(tmp_path):
    """lf-4133 (0.7.1.dev0): evaluation_strategy, a key of transformers before 4.53, allows 0.7.1 .. 0.9.4, whose
    optimizer is foreach AdamW; lf-3638 (0.7.x): src/train.py with its flags is LLaMA-Factory's QLoRA run."""
    run = FIELD / "lf-4133-qwen15-7b-full-z2-a100-40g"
    for f in ("launch.sh", "qwen2_full_sft_ds_tool.yaml"):
        shutil.copy(run / f, tmp_path / f)
    r = intake.read([str(tmp_path / "launch.sh"), str(tmp_path / "qwen2_full_sft_ds_tool.yaml")])
    s = _s(r)
    assert s["framework"].value == "llamafactory@0.9.4" and r.releases == (
        "0.7.1",
        "0.8",
        "0.9.1",
        "0.9.2",
        "0.9.3",
        "0.9.4",
    )
    assert "evaluation_strategy" in s["framework"].source and r.request["optimizer"] == "adamw"
    assert not any("evaluation_strategy" in u for u in r.unplanned)
    qlora = intake.read([str(FIELD / "lf-3638-llama3-8b-1m-qlora-100k-1xa100" / "train.sh")])
    assert qlora.framework == "llamafactory" and qlora.request["quant"] == "nf4"
    assert qlora.request["lora_targets"] == "q_proj,v_proj" and qlora.request["seq_len"] == 102400


def test_a_script_named_train_py_without_llamafactorys_flags_stays_a_trainer(tmp_path):
    r = _read(tmp_path, "python src/train.py --model_name_or_path Qwen/Qwen2.5-7B --per_device_train_batch_size 2\n")
    assert r.framework == "hf"


@pytest.mark.parametrize("face", ["suggest", "check"])
def test_framework_at_a_release_on_the_command_line(face, capsys):
    argv = [face, "--model", "qwen2.5-0.5b", "--gpu", "h100", "--framework", "llamafactory@0.8.3", "--seq-len", "1024"]
    argv += ["--global-batch", "8", "--json"] if face == "suggest" else ["--micro-batch", "1", "--json"]
    assert main(argv) == 0
    assert '"release": "0.8"' in capsys.readouterr().out


def test_framework_at_a_release_in_check_config_and_the_api(tmp_path):
    path = FIELD / "lf-7197-llama31-8b-lora-ddp-7x4090" / "training_args.yaml"
    out = checkconfig.check_config([str(path)], {"gpu": "rtx4090", "framework": "llamafactory@0.8"})
    s = {x["field"]: x for x in out.config["settings"]}
    assert s["framework"]["value"] == "llamafactory@0.8" and "--framework llamafactory@0.8" in s["framework"]["source"]
    with pytest.raises(BadInput, match="llamafactory@0.3: LLaMA-Factory has no release '0.3'; it takes 0.5, 0.6"):
        checkconfig.check_config([str(path)], {"gpu": "rtx4090", "framework": "llamafactory@0.3"})
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from api.main import create_app
    from api.settings import Settings

    client = TestClient(create_app(Settings(store=tmp_path / "store.sqlite", allowed_hosts=["testserver"])))
    try:
        body = {"model": "qwen2.5-0.5b", "gpu": "h100", "micro_batch": 1, "seq_len": 1024, "evidence": "analytic"}
        r = client.post("/v1/check", json={**body, "framework": "llamafactory@0.9.4"})
        assert r.status_code == 200, r.text
        assert (r.json()["plan"]["framework"], r.json()["plan"]["release"]) == ("llamafactory", "0.9.4")
    finally:
        client.app.state.pool.stop()


def test_planner_frameworks_lists_the_releases(capsys):
    assert main(["frameworks", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"0.7.1"' in out and "train_bash.py" in out and "data_args.py:44-45" in out


def test_where_the_releases_verdicts_differ_the_headline_takes_the_hungrier(tmp_path):
    """No pin, no cutoff_len: 1024 tokens fit to v0.9.0, 2048 from v0.9.1 do not: the answer is "does not fit" and
    names the releases it fits with."""
    text = "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: full\nper_device_train_batch_size: 4\n"
    path = tmp_path / "train.yaml"
    path.write_text(text + "bf16: true\ndeepspeed: examples/deepspeed/ds_z3_config.json\n")
    out = checkconfig.check_config([str(path)], {"gpu": "a100-40gb", "gpus_per_node": 8})
    releases = out.config["releases"]
    assert not out.plan.fits and releases["planned"] == "0.9.5" and out.context[2].seq_len == 2048
    assert releases["fits"] == ["0.5", "0.6", "0.7", "0.7.1", "0.8"] and "0.9.1" in releases["does_not_fit"]


def test_a_file_written_for_an_older_release_holds_that_releases_keys_and_pins_it(tmp_path):
    """Issue 46: 0.7.1's YAML names dpo_beta / dpo_loss (keys.py renames), its launch runs src/train.py under torchrun
    (its CLI started none), and requirements.txt pins the release; the newest's names pref_beta under the CLI."""
    argv = ["suggest", "--model", "qwen2.5-0.5b", "--gpu", "h100", "--max-length", "1024", "--global-batch", "8"]
    argv += ["--workload", "dpo", "--framework", "llamafactory@0.7.1", "--emit", str(tmp_path / "old")]
    assert main(argv) == 0
    text = (tmp_path / "old" / "llamafactory_train.yaml").read_text()
    assert "dpo_beta: 0.1" in text and "pref_beta" not in text and "LLaMA-Factory 0.7.1's" in text
    assert "src/train.py llamafactory_train.yaml" in (tmp_path / "old" / "launch.sh").read_text()
    assert "llamafactory>=0.7.1,<0.8.0" in (tmp_path / "old" / "requirements.txt").read_text()
    assert main([*argv[:-4], "--framework", "llamafactory", "--emit", str(tmp_path / "new")]) == 0
    new = (tmp_path / "new" / "llamafactory_train.yaml").read_text()
    assert "pref_beta: 0.1" in new and "dpo_beta" not in new and "LLaMA-Factory 0" not in new
    assert "llamafactory==0.9.5" in (tmp_path / "new" / "requirements.txt").read_text()


def test_the_lines_that_run_only_transformers_4_45_to_4_50_plan_the_masked_tower():
    """v0.9.0 (the 0.8 line's Qwen2-VL release) pins transformers <=4.45.0, v0.9.1 <=4.46.1, v0.9.2 <=4.49.0: the
    Qwen2-VL / Qwen2.5-VL tower's SDPA on 3-D tensors over every patch (planner.estimate.vision.masked_tower_bytes);
    v0.9.3 allows 4.51-4.52.4 and v0.9.4 pins 4.51.0 on, whose towers pass 4-D tensors. The advice names the line's
    own pixel-cap key."""
    from planner import advise
    from planner.frameworks import FRAMEWORKS, adapter

    masked = {
        r.name for r in FRAMEWORKS["llamafactory"].releases if adapter("llamafactory", r.name).tower_sdpa != "split"
    }
    assert masked == {"0.8", "0.9.1", "0.9.2"}
    req = {"model": "qwen2.5-vl-7b", "gpu": "a100-80gb", "gpus_per_node": 1, "micro_batch": 1, "seq_len": 18432}
    req |= {"image_tokens": 16384, "lora_rank": 8, "precision": "bf16"}
    for line, key in (("0.9.2", "image_max_pixels"), ("0.9.1", "image_resolution")):
        plan = advise.check(advise.parse(advise.CheckRequest, {**req, "framework": f"llamafactory@{line}"})).plan
        assert not plan.fits and f"a lower {key} (the image's pixel cap)" in plan.reason
    plan = advise.check(advise.parse(advise.CheckRequest, {**req, "framework": "llamafactory@0.9.3"})).plan
    assert "vision tower" not in (plan.reason or "")
