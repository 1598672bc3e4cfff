"""The `planner` command as a user runs it: exit codes, JSON contract, one-line errors."""
import json
import subprocess
import sys

import pytest

from planner.cli import main

PLAN_KEYS = {"micro_batch", "grad_accum", "world_size", "global_batch", "precision", "checkpointing", "zero_stage",
             "offload", "optimizer", "lora_rank", "memory", "fits", "reason", "step_time_s", "tokens_per_s",
             "evidence", "launch"}
MEMORY_KEYS = {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "temp_bytes",
               "peak_allocated_bytes", "overhead_bytes", "device_total_bytes", "capacity_bytes", "headroom_bytes"}
SUGGEST = ["suggest", "--model", "llama-3.1-8b", "--gpu", "a100-80gb", "--gpus-per-node", "8",
           "--global-batch", "256", "--seq-len", "4096"]


def planner(*args):
    return subprocess.run([sys.executable, "-m", "planner.cli", *args], capture_output=True, text=True, timeout=60, check=False)


def test_suggest_json_contract():
    r = planner(*SUGGEST, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) >= {"model", "hardware", "goal", "plans", "rejected"}
    assert out["model"]["params"] == 8_030_261_248
    for p in out["plans"]:
        assert PLAN_KEYS <= set(p) and MEMORY_KEYS <= set(p["memory"])
        assert p["micro_batch"] * p["grad_accum"] * p["world_size"] == 256
        assert p["evidence"] == "analytic" and p["fits"]
        assert set(p["launch"]) == {"hf_args", "deepspeed_config", "command"}
        assert all(isinstance(p["memory"][k], int) for k in MEMORY_KEYS)


def test_suggest_table_and_nothing_fits_exit_3():
    r = planner(*SUGGEST, "--top", "3")
    assert r.returncode == 0 and "tokens/s" in r.stdout and "GiB" in r.stdout
    r = planner("suggest", "--model", "qwen2.5-72b", "--gpu", "a100-80gb", "--gpus-per-node", "8",
                "--global-batch", "64", "--seq-len", "4096", "--offload", "none", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 3 and out["plans"] == [] and len(out["rejected"]) == 8


def test_check_fits_and_suggests_alternatives():
    args = ["check", "--model", "qwen2.5-vl-3b", "--gpu", "h20", "--gpus-per-node", "6", "--micro-batch", "4",
            "--grad-accum", "1", "--seq-len", "4096", "--image-tokens", "1024", "--precision", "bf16",
            "--checkpointing", "off", "--json"]
    r = planner(*args)
    out = json.loads(r.stdout)
    assert r.returncode == 3 and not out["plan"]["fits"] and out["plan"]["reason"]
    assert 1 <= len(out["suggestions"]) <= 5
    assert all(s["global_batch"] == 24 and s["fits"] for s in out["suggestions"])
    ok = planner("check", "--model", "debug-llama", "--gpu", "rtx4090", "--micro-batch", "2", "--grad-accum", "2",
                 "--seq-len", "512", "--precision", "bf16", "--checkpointing", "off")
    assert ok.returncode == 0 and "fits" in ok.stdout


@pytest.mark.parametrize("args,needle", [
    (["--global-batch", "0"], "--global-batch 0"),
    (["--global-batch", "-4"], "--global-batch -4"),
    (["--model", "llama-9"], "unknown model 'llama-9'"),
    (["--gpu", "b300"], "unknown GPU 'b300'"),
    (["--precision", "bf17"], "--precision 'bf17'"),
    (["--zero", "5"], "--zero '5'"),
    (["--global-batch", "255"], "nearest valid global batches: 248, 256"),
    (["--model", "/no/such/config.json"], "no such config.json"),
    (["--gpu", "local"], "--gpu local"),
    (["--image-tokens", "64"], "has no vision tower"),
    (["--model", "gpt2", "--seq-len", "2048"], "gpt2 has learned positions for at most 1024 tokens"),
])
def test_bad_input_exits_2_with_one_line(args, needle):
    base = dict(zip(SUGGEST[1::2], SUGGEST[2::2]))
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    r = planner("suggest", *[x for kv in base.items() for x in kv])
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_malformed_config_exits_2(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    r = planner("suggest", "--model", str(tmp_path), "--gpu", "a100", "--global-batch", "8", "--seq-len", "128")
    assert r.returncode == 2 and "malformed config.json" in r.stderr


def test_check_rejects_impossible_combinations():
    r = planner("check", "--model", "gpt2", "--gpu", "a100", "--micro-batch", "1", "--grad-accum", "1",
                "--seq-len", "128", "--precision", "bf16", "--checkpointing", "off", "--offload", "optimizer")
    assert r.returncode == 2 and "needs DeepSpeed" in r.stderr


def test_gpus_and_models_json(capsys):
    assert main(["gpus", "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)["gpus"]
    assert any(g["name"] == "h20" for g in gpus)
    assert main(["models", "--json"]) == 0
    models = {m["name"]: m for m in json.loads(capsys.readouterr().out)["models"]}
    assert models["qwen2.5-vl-7b"]["vision_params"] > 0 and models["llama-2-7b"]["layers"] == 32


def test_emit_writes_launch_files(tmp_path):
    r = planner(*SUGGEST, "--zero", "3", "--emit", str(tmp_path))
    assert r.returncode == 0
    ds = json.loads((tmp_path / "ds_config.json").read_text())
    args = json.loads((tmp_path / "train_args.json").read_text())
    assert ds["train_batch_size"] == 256 == ds["train_micro_batch_size_per_gpu"] * ds["gradient_accumulation_steps"] * 8
    assert args["per_device_train_batch_size"] == ds["train_micro_batch_size_per_gpu"]
    sbatch = (tmp_path / "launch.sbatch").read_text()
    assert "srun" in sbatch and "torchrun" in sbatch and "MASTER_ADDR" in sbatch and "MASTER_PORT" in sbatch


def test_analytic_path_never_imports_torch():
    code = ("import sys; from planner.cli import main; "
            "rc = main(['suggest','--model','qwen2.5-7b','--gpu','h100','--gpus-per-node','8',"
            "'--global-batch','64','--seq-len','2048','--json']); "
            "assert rc == 0; assert 'torch' not in sys.modules, 'torch imported'; print('clean')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0 and r.stdout.strip().endswith("clean"), r.stderr
