"""`planner check --config FILE...` as a user runs it (issue 31 item 2): the run a user already has, read field by
field with where each value came from, checked, and the nearest changes said in the framework's own keys."""

import json

from tests.planner.cli.helpers import ROOT, one_line_error, planner

CONFIGS = ROOT / "docs" / "examples" / "configs"
VLM_R1 = CONFIGS / "vlm-r1" / "run_scripts" / "run_grpo_rec_lora.sh"
LF_LORA = CONFIGS / "llamafactory" / "qwen2_5vl_lora_sft.yaml"
SWIFT = CONFIGS / "swift" / "caption.sh"


def check(*args) -> dict:
    r = planner("check", "--config", *args, "--json")
    assert r.returncode in (0, 3), r.stderr
    return json.loads(r.stdout)


def settings(out: dict) -> dict:
    return {s["field"]: s for s in out["config"]["settings"]}


def test_a_vlm_r1_grpo_script_is_read_with_its_deepspeed_json():
    out = check(str(VLM_R1), "--gpu", "h100")
    cfg, p = out["config"], out["plan"]
    assert cfg["framework"] == "trl" and [f.rsplit("/", 1)[-1] for f in cfg["files"]] == [VLM_R1.name, "zero2.json"]
    s = settings(out)
    assert s["micro_batch"]["source"].startswith("run_grpo_rec_lora.sh:39 --per_device_train_batch_size 8")
    assert (p["micro_batch"], p["grad_accum"], p["world_size"], p["zero_stage"], p["lora_rank"]) == (8, 2, 8, 2, 64)
    assert p["workload"]["kind"] == "grpo" and p["workload"]["num_generations"] == 8
    assert out["model"]["name"] == "qwen2.5-vl-3b" and "memplan assumption" in s["model"]["source"]
    assert any("--use_peft" in line for line in cfg["unplanned"])  # said, not dropped


def test_a_llamafactory_lora_yaml_takes_llamafactorys_defaults_and_says_so():
    out = check(str(LF_LORA), "--gpu", "a100-80gb", "--gpus-per-node", "8")
    s, p = settings(out), out["plan"]
    assert out["config"]["framework"] == "llamafactory" == p["framework"]
    assert p["checkpointing"] == "full" and "model_args.py:145" in s["checkpointing"]["source"]  # LF's default
    assert s["image_tokens"]["value"] == 1003520 // 784 and out["goal"]["image_tokens"] == 1280
    assert (p["micro_batch"], p["grad_accum"], p["zero_stage"], p["lora_rank"]) == (8, 2, 2, 16)
    assert not p["fits"]
    # the file allows 0.9.2 .. 0.9.5; the answer is the hungriest line's, 0.9.2, whose transformers run the tower's
    # SDPA over a mask of every patch (planner.estimate.vision.masked_tower_bytes): its nearest change is micro 1
    assert p["release"] == out["config"]["releases"]["planned"] == "0.9.2" and not out["config"]["releases"]["fits"]
    said = [line for n in out["nearest"] for line in n["keys"]]
    assert "per_device_train_batch_size: 1" in said
    at_095 = check(str(LF_LORA), "--gpu", "a100-80gb", "--gpus-per-node", "8", "--framework", "llamafactory@0.9.5")
    said = [line for n in at_095["nearest"] for line in n["keys"]]  # ZeRO-3 with offload, in LF's own preset's name
    assert "deepspeed: ds_z3_offload_config.json" in said and "cutoff_len: 2048" in said


def test_an_ms_swift_command_line_takes_swifts_defaults():
    out = check(str(SWIFT), "--gpu", "h100")
    s, p = settings(out), out["plan"]
    assert out["config"]["framework"] == "swift" and p["checkpointing"] == "full"
    assert "trainers/arguments.py:135" in s["checkpointing"]["source"]  # ms-swift checkpoints by default
    assert (p["micro_batch"], p["grad_accum"], p["world_size"], p["lora_rank"]) == (1, 16, 1, 8)


def test_a_flag_overrides_the_config_and_the_table_says_so():
    out = check(str(LF_LORA), "--gpu", "a100-80gb", "--gpus-per-node", "8", "--micro-batch", "2", "--grad-accum", "8")
    s = settings(out)
    assert (out["plan"]["micro_batch"], out["plan"]["grad_accum"]) == (2, 8)
    assert s["micro_batch"]["value"] == 2 and s["micro_batch"]["source"].startswith("a flag (the config: 8,")
    r = planner("check", "--config", str(LF_LORA), "--gpu", "a100-80gb", "--gpus-per-node", "8")
    assert (
        r.returncode == 3 and "read from qwen2_5vl_lora_sft.yaml" in r.stdout and "in llamafactory's keys" in r.stdout
    )


def test_what_cannot_be_read_is_one_line(tmp_path):
    unknown = tmp_path / "run.yaml"
    unknown.write_text("model_name_or_path: acme/not-a-model\nstage: sft\nfinetuning_type: lora\n")
    one_line_error(planner("check", "--config", str(unknown), "--gpu", "h100"), "give --model PATH (its config.json)")
    one_line_error(planner("check", "--config", str(tmp_path / "missing.yaml"), "--gpu", "h100"), "missing.yaml")
    one_line_error(planner("check", "--model", "qwen2.5-7b", "--gpu", "h100"), "--micro-batch is required")


def test_the_files_length_caps_the_data_given_beside_them(tmp_path):
    """Issue 47 item 6: --config with --data was refused ("not both"); the files' max_length is a cap on the data's rows
    and the data decides the length under it (the 200-row example's longest is 2,844 tokens: cut at 1,024)."""
    script = tmp_path / "run.sh"
    script.write_text(
        "torchrun --nproc_per_node 4 train.py --model_name_or_path Qwen/Qwen2.5-VL-7B-Instruct "
        "--per_device_train_batch_size 1 --max_length 1024 --bf16 --gradient_checkpointing true\n"
    )
    data = ["--data", str(ROOT / "docs/examples/vlm-chat.jsonl"), "--tokenizer", str(ROOT / "docs/examples/tokenizer")]
    out = check(str(script), "--gpu", "h100", *data)
    assert out["goal"]["seq_len"] == 1024 and out["data"]["truncated_rows"] == 67
    assert settings(out)["seq_len"]["source"].startswith("a cap on --data's rows (the config: 1024, run.sh:1")


def test_files_that_leave_the_length_open_get_the_longest_rows_that_fit(tmp_path):
    """Issue 47 item 6: no max_length in the files was a refusal (or, before, the model's whole context); now the plan is
    made at the longest rows the configuration fits under the context, and says the data decides."""
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}, "bf16": {"enabled": true}}')
    script = tmp_path / "run.sh"
    script.write_text(
        "torchrun --nproc_per_node 4 train.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct "
        "--per_device_train_batch_size 2 --bf16 --gradient_checkpointing true --deepspeed ds.json\n"
    )
    out = check(str(script), "--gpu", "h100")
    o = out["open_length"]
    assert out["plan"]["fits"] and out["goal"]["seq_len"] == o["fits_up_to_tokens"] == o["planned_at"] < o["context"]
    longer = check(str(script), "--gpu", "h100", "--seq-len", str(o["fits_up_to_tokens"] + 64))
    assert not longer["plan"]["fits"] and longer["open_length"] is None  # the edge is the edge
    r = planner("check", "--config", str(script), "--gpu", "h100")
    assert f"fits rows up to {o['fits_up_to_tokens']:,} tokens of the model's {o['context']:,}; your data" in r.stdout


SWIFT_EXAMPLES = ROOT / "tests" / "data" / "frameworks" / "swift" / "examples" / "train"


def test_ms_swifts_default_max_length_is_an_open_length_the_data_decides():
    """Issue 47 item 6: ms-swift's max_length defaults to the model's context (base_args.py:227-228); its own LoRA
    example without one was "does NOT fit" at Qwen2.5-7B's 131,072 tokens. It is planned at the longest rows that fit,
    and --seq-len closes it."""
    script = str(SWIFT_EXAMPLES / "tuners" / "adalora" / "train.sh")
    out = check(script, "--gpu", "a100-80gb")
    o = out["open_length"]
    assert o["what"] == "rows" and out["goal"]["seq_len"] == o["planned_at"] == o["fits_up_to_tokens"] > 0
    assert o["fits_up_to_tokens"] <= o["context"] and out["plan"]["fits"]
    assert "base_args.py:227-228" in settings(out)["seq_len"]["source"]
    closed = check(script, "--gpu", "a100-80gb", "--seq-len", "2048")
    assert closed["open_length"] is None and closed["goal"]["seq_len"] == 2048


def test_an_open_length_under_sequence_parallel_is_whole_chunks(tmp_path):
    """ms-swift v4.5.2's sequence_parallel_emb.sh and _reranker.sh leave max_length open under
    --sequence_parallel_size 4: the search for the longest rows found 107,523 tokens for Qwen2.5-7B LoRA, then refused
    as not 4 equal chunks, and where nothing fits tried lengths under 4 tokens (a rank's share 0) and stopped on a
    ZeroDivisionError. It searches whole chunks: a multiple of 4 that fits, or no length at all."""
    head = "NPROC_PER_NODE=4 CUDA_VISIBLE_DEVICES=0,1,2,3 swift sft --sequence_parallel_size 4 --padding_free true "
    script = tmp_path / "sp.sh"
    script.write_text(head + "--model Qwen/Qwen2.5-7B --attn_impl flash_attn\n")
    o = _gathered(script).open_length  # in process: the CLI's own parser and gather, no interpreter start
    assert o["planned_at"] % 4 == 0 and 0 < o["planned_at"] == o["fits_up_to_tokens"] < o["context"]
    script.write_text(head + "--model Qwen/Qwen2.5-7B --tuner_type full --torch_dtype float32 --attn_impl flash_attn\n")
    out = _gathered(script)  # fp32 states of 7B on each GPU: no length fits
    assert not out.plan.fits and out.open_length["fits_up_to_tokens"] == 0


def _gathered(script):
    from planner.cli import build_parser, check

    return check.gather(build_parser().parse_args(["check", "--config", str(script), "--gpu", "h100"]))[1]


def test_an_ms_swift_grpo_prompt_left_at_the_context_is_planned_at_the_longest_that_fits():
    """The same default is GRPO's prompt limit (truncated left): ms-swift's colocated Qwen2.5-VL-7B example on 8 x
    A100 80GB was refused at 128,000-token prompts; the answer is the longest prompt the run fits, said as the
    condition, and --max-prompt-length closes it."""
    script = str(SWIFT_EXAMPLES / "grpo" / "internal" / "vllm_vl7b.sh")
    out = check(script, "--gpu", "a100-80gb")
    o, w = out["open_length"], out["plan"]["workload"]
    assert o["what"] == "prompts" and 0 < o["fits_up_to_tokens"] < o["context"] == 128000
    assert w["max_prompt_length"] == o["planned_at"] == o["fits_up_to_tokens"] and out["plan"]["fits"]
    longer = check(script, "--gpu", "a100-80gb", "--max-prompt-length", str(o["fits_up_to_tokens"] + 256))
    assert longer["open_length"] is None and not longer["plan"]["fits"]
    r = planner("check", "--config", script, "--gpu", "a100-80gb")
    assert f"fits prompts up to {o['fits_up_to_tokens']:,} tokens of the model's 128,000" in r.stdout


def test_a_vlm_run_planned_at_one_image_a_row_says_so_in_its_headline_and_json():
    """Issue 47 items 5 and 6: the files say the pixel cap (MAX_PIXELS=1003520), not how many images a row holds;
    the headline marks the assumption, a line says it as the verdict's condition and the JSON carries it
    (planner.intake.media); --images given, the rows' media are the user's and nothing is said."""
    out = check(str(SWIFT), "--gpu", "h100")
    media = out["media"]
    assert (media["images_per_row"], media["tokens_per_image"], media["videos"]) == (1, 1003520 // 784, 0)
    assert media["source"] == settings(out)["image_tokens"]["source"]
    lines = planner("check", "--config", str(SWIFT), "--gpu", "h100", "--brief").stdout.splitlines()
    assert lines[0].startswith("qwen2.5-vl-7b, one image a row of at most 1,280 tokens (assumed): micro 1 x accum 16")
    assert lines[1] == media["condition"] and "(MAX_PIXELS); rows with more images, or with videos," in lines[1]
    told = planner("check", "--config", str(SWIFT), "--gpu", "h100", "--images", "1", "--brief").stdout
    assert "(assumed)" not in told and "the files do not say how many" not in told
