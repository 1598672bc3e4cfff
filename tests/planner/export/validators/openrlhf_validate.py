"""Check OpenRLHF 0.11.2 launch scripts (`python3 -m openrlhf.cli.train_ppo_ray --flags ...`) with OpenRLHF's own
code, offline: no Ray cluster, no GPU, no model.

Usage: python openrlhf_validate.py A.sh [B.sh ...]   (the python of a venv with openrlhf==0.11.2, tools/fwenv.sh)

OpenRLHF builds its parser inside `if __name__ == "__main__"` (cli/train_ppo_ray.py:197-627), so there is no parser
to import: each script's flags are run through the module itself (runpy, as `python -m` runs it), which parses them
(an unknown flag, a flat name of 0.10.1, a bad choice or type: argparse's exit 2), runs its post-parse checks
(:630-763: estimators that need groups, sleep without colocation, the samples a step needs, ...) and then train()'s
placement (:19-142: actor/ref and critic/reward colocation counts, vLLM engines x tensor-parallel size against the
actor's GPUs under --train.colocate_all). Ray, the DeepSpeed strategy, the vLLM engines and the role groups are
replaced by recorders, and the trainer's construction ends the run: nothing starts. Prints the roles, each role's
GPUs and the engines per file; exits 1 at the first script refused.
"""

import runpy
import shlex
import sys
import types
from pathlib import Path

from absent_modules import stand_in

ABSENT = stand_in("vllm", "flash_attn")  # the old-release venvs (tools/fwenv_old.sh) install neither

import openrlhf.trainer.ray as otr
import openrlhf.utils
import ray
import ray.util.placement_group
from openrlhf.trainer.ray import launcher
from verdict import verdicts

ENTRY = "openrlhf.cli.train_ppo_ray"
DPO_ENTRY = "openrlhf.cli.train_dpo"
SFT_ENTRY = "openrlhf.cli.train_sft"  # one trainer as train_dpo: its parser and __main__ checks, then get_strategy
STATE: dict = {}


class _Done(BaseException):
    """train() reached the trainer: every check before it passed."""


def _get_strategy(args):
    STATE["args"] = args
    if STATE.get("dpo"):  # train_dpo: its parser and __main__ checks passed; training would start here
        raise _Done
    return types.SimpleNamespace(print=lambda *a, **k: None)


class _PG:
    def __init__(self, bundles, strategy):
        self.id = len(STATE["pgs"])
        STATE["pgs"].append(len(bundles))

    def ready(self):
        return None


def _engines(num_engines, tensor_parallel_size, *a, **k):
    STATE["vllm"] = (num_engines, tensor_parallel_size)
    return ["engine"] * num_engines


class _Group:
    def __init__(self, num_nodes, num_gpus_per_node, actor_type, pg=None, num_gpus_per_actor=1, **k):
        role = getattr(getattr(actor_type, "__ray_metadata__", None), "class_name", repr(actor_type))
        STATE["groups"].append(
            (role.replace("ModelActor", "").replace("Model", ""), num_nodes * num_gpus_per_node, pg is not None)
        )


class _Trainer:
    @staticmethod
    def remote(*a, **k):
        raise _Done


ray.is_initialized = lambda: True  # train() skips ray.init()
ray.get = lambda *a, **k: None
sys.modules["ray.util.placement_group"].placement_group = _PG
openrlhf.utils.get_strategy = _get_strategy
otr.create_vllm_engines = _engines
launcher.RayActorGroup = _Group
sys.modules["openrlhf.trainer.ppo_trainer"] = types.SimpleNamespace(PPOTrainer=_Trainer)
sys.modules["openrlhf.trainer.ppo_trainer_async"] = types.SimpleNamespace(PPOTrainerAsync=_Trainer)


def flags_of(path: Path) -> tuple[str, list[str]]:
    """(module, flags): `python3 -m openrlhf.cli.train_ppo_ray ...` or `deepspeed ... --module openrlhf.cli.train_dpo`
    (or train_sft)."""
    toks = shlex.split(path.read_text().replace("\\\n", " "), comments=True)
    if toks[:3] == ["python3", "-m", ENTRY]:
        return ENTRY, toks[3:]
    if toks[:1] == ["deepspeed"] and "--module" in toks and toks[toks.index("--module") + 1] in (DPO_ENTRY, SFT_ENTRY):
        return toks[toks.index("--module") + 1], toks[toks.index("--module") + 2 :]
    raise ValueError(f"not `python3 -m {ENTRY}` nor `deepspeed --module {DPO_ENTRY}|{SFT_ENTRY}`: {toks[:3]}")


def check(path: Path) -> str:
    STATE.clear()
    module, flags = flags_of(path)
    STATE.update(pgs=[], groups=[], vllm=None, dpo=module in (DPO_ENTRY, SFT_ENTRY))
    sys.argv = [module.rsplit(".", 1)[1] + ".py", *flags]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except _Done:
        pass
    else:
        raise AssertionError("train() returned before it built the trainer")
    a = STATE["args"]
    micro, batch = (
        _arg(a, "train.micro_batch_size", "micro_train_batch_size"),
        _arg(a, "train.batch_size", "train_batch_size"),
    )
    if STATE["dpo"]:
        what = "dpo:" if module == DPO_ENTRY else f"sft: max_len {_arg(a, 'data.max_len', 'max_len')},"
        return f"{what} micro {micro}, batch {batch}, zero {_arg(a, 'ds.zero_stage', 'zero_stage')}"
    roles = ", ".join(f"{r} {g} GPUs{' shared' if shared else ''}" for r, g, shared in STATE["groups"])
    engines = STATE["vllm"]
    return (
        f"{_arg(a, 'algo.advantage.estimator', 'advantage_estimator')}: {roles}; vLLM {engines[0]} x tp {engines[1]} "
        f"at {_arg(a, 'vllm.gpu_memory_utilization', 'vllm_gpu_memory_utilization')}; micro {micro}, batch {batch}"
    )


def _arg(args, dotted: str, flat: str) -> object:
    """An option of the parsed args: 0.10.2's nested namespaces (train.batch_size), else `flat`, its name in 0.10.1
    and before (train_batch_size)."""
    node = args
    for part in dotted.split("."):
        node = getattr(node, part, None)
        if node is None:
            return getattr(args, flat)
    return node


if __name__ == "__main__":
    sys.exit(verdicts(sys.argv[1:], check))
