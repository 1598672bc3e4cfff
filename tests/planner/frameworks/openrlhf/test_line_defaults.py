"""Issue 47 ("another trainer's defaults are never borrowed silently") at each OpenRLHF flat-flag line: what memplan
fills where a train_sft / train_dpo / train_ppo_ray command names only the model(s) and the save path, read at the line
its `openrlhf==` pin names, equals that release's own argparse defaults. The parsers are built under `__main__` in
cli/*.py, not importable: their add_argument calls are read from the syntax tree of the venv's copy (tools/fwenv_old.sh
orl-0.8.9, orl-0.10.1), in the venv's Python (a store_true switch defaults to False), one process a venv, < 1 s.
Failed before the fixes, at orl-0.8.9: DPO and PPO planned in 0.11.2's bf16 where --bf16 off runs DeepSpeed's fp32
(v0.8.9 cli/train_dpo.py:195, train_ppo_ray.py:275), PPO's prompt and completion 512 + 1536 (0.11.2's --data.max_len
2048, split) where --prompt_max_len and --generate_max_len are 1024 each (:320-321), and its rollout micro-batch 1
where --micro_rollout_batch_size is 8 (:318); at orl-0.10.1: SFT planned in fp32 (0.5.7's --bf16 off) where
--param_dtype is bf16 (v0.10.1 cli/train_sft.py:182)."""

from pathlib import Path

import pytest

from tests.planner.frameworks.linedefaults import cited_defaults, own_defaults, read_pinned, venv_or_skip

LINES = [("0.8", "0.8.9"), ("0.10", "0.10.1")]
PROBE = """
import ast, importlib.util, json, pathlib
root = pathlib.Path(importlib.util.find_spec("openrlhf").submodule_search_locations[0]) / "cli"
out = {}
for script in ("train_sft", "train_dpo", "train_ppo_ray"):
    o = out[script] = {}
    for node in ast.walk(ast.parse((root / (script + ".py")).read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
            kw = {k.arg: k.value for k in node.keywords}
            name = ast.literal_eval(node.args[0]).lstrip("-")
            if "default" in kw:
                o[name] = ast.literal_eval(kw["default"]) if isinstance(kw["default"], ast.Constant) else None
            elif "action" in kw and ast.literal_eval(kw["action"]) == "store_true":
                o[name] = False
print(json.dumps(out))
"""
MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
COMMANDS = {
    "train_sft": f"deepspeed --module openrlhf.cli.train_sft --pretrain {MODEL} --save_path out",
    "train_dpo": f"deepspeed --module openrlhf.cli.train_dpo --pretrain {MODEL} --save_path out",
    "train_ppo_ray": f"python3 -m openrlhf.cli.train_ppo_ray --pretrain {MODEL} --reward_pretrain {MODEL} --save_path out",
}


def _read(tmp_path: Path, version: str, script: str) -> dict:
    r = read_pinned(tmp_path / script, f"openrlhf=={version}", "run.sh", COMMANDS[script] + "\n")
    return {s.field: s for s in r.settings}


def _expected(a: dict, script: str) -> dict:
    """memplan's fields from a script's argparse defaults: --bf16 (to 0.8.9, a switch) or --param_dtype (0.10),
    --flash_attn (to 0.8.9, a switch: eager off) or --attn_implementation, and the lengths and batches."""
    out = {
        "precision": a["param_dtype"] if "param_dtype" in a else "bf16" if a["bf16"] else "fp32",
        "attention": "flash" if a.get("flash_attn") or "flash" in str(a.get("attn_implementation")) else "eager",
        "micro_batch": a["micro_train_batch_size"],
        "zero_stage": a["zero_stage"],
        "checkpointing": "full" if a["gradient_checkpointing"] else "off",
    }
    world = 8 if script == "train_ppo_ray" else 1  # the actor's 8 GPUs (--actor_num_gpus_per_node 8); deepspeed's 1
    out["grad_accum"] = a["train_batch_size"] // (a["micro_train_batch_size"] * world)
    if script == "train_sft":
        out["seq_len"] = a["max_len"]
    if script == "train_dpo":
        out["workload.max_length"] = a["max_len"]
    if script == "train_ppo_ray":
        total = a["max_len"] or a["prompt_max_len"] + a["generate_max_len"]  # v0.8.9 :44
        completion = a.get("generate_max_len") or a.get("max_new_tokens")
        out |= {
            "workload.max_prompt_length": total - completion if completion else total // 4,
            "workload.max_completion_length": completion or total - total // 4,
            "workload.roles.logprob_max_tokens_per_gpu": a["micro_rollout_batch_size"] * total,
            "workload.beta": a["init_kl_coef"],
            "workload.num_generations": a["n_samples_per_prompt"],
        }
    return out


@pytest.mark.parametrize(("line", "version"), LINES, ids=[f"openrlhf@{line}:orl-{v}" for line, v in LINES])
def test_each_line_fills_its_own_releases_defaults(tmp_path, line, version):
    venv = venv_or_skip(f"orl-{version}")
    own = own_defaults(venv, PROBE)
    for script in COMMANDS:
        s = _read(tmp_path, version, script)
        # fp32 is a value memplan's openrlhf adapter does not run: the plan is the bundled trainer's, saying so
        assert s["framework"].value in (f"openrlhf@{line}", "memplan"), (script, s["framework"])
        for field, want in _expected(own[script], script).items():
            assert s[field].value == want, (script, field, s[field].value, s[field].source, want)
            # a default the line did not move names the line, as at the newest (line_defaults.restate)
            assert cited_defaults(s[field].source) <= {f"openrlhf@{line}"}, (script, field, s[field].source)
