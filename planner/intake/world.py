"""The processes a node and the nodes a training command's launcher starts: torchrun (its options, or the PET_*
variables its argparse reads), deepspeed (a hostfile, --include, --num_gpus, --num_nodes, and the CUDA_VISIBLE_DEVICES
it ignores beside them), accelerate launch and its config (also under a framework's CLI that runs it: Tool.wraps), a
bare python; and `srun`, which starts the launcher on each node of its allocation. Where two of them disagree the reading says which one it used, in one line.
"""

from __future__ import annotations

import re

from planner.frameworks import FRAMEWORKS, cli
from planner.frameworks.accelerate import reader as accelerate
from planner.intake import launch, slurm
from planner.intake.collect import (
    ASK_GPUS,
    Collector,
    as_int,
    count_devices,
    default,
    known,
    processes_fit_devices,
    show,
)
from planner.intake.flags import Flag
from planner.intake.shellvars import find_file

TORCH = "torch 2.13"
DS = "deepspeed 0.19.8 deepspeed/launcher/runner.py"
_HOST = re.compile(r"^(\S+)\s+slots=(\d+)")  # a hostfile line (runner.py:225-236)


def read(c: Collector, run: launch.Run) -> None:
    env, o, where = run.command.env, run.opts, run.where
    visible = count_devices(env.get("CUDA_VISIBLE_DEVICES", ""))
    if run.tool == "torchrun":
        _torchrun(c, run, visible)
    elif run.tool == "deepspeed":
        _deepspeed(c, run, visible)
    elif _launcher(run.tool) == "accelerate":
        _accelerate(c, run)
    elif run.tool == "python":
        _python(c, run, visible)
    srun(c, run)
    if o.get("nnodes") is None and run.tool == "torchrun" and "PET_NNODES" in env:
        _nodes(c, Flag("nnodes", env["PET_NNODES"], f"{where} PET_NNODES={show(env['PET_NNODES'])}", "PET_NNODES"))


_DEVICE_MAP = re.compile(r"device_map\s*=\s*(?!None\b)")


def _python(c: Collector, run: launch.Run, visible: int | None) -> None:
    """A bare python: one process. HF's Trainer counts every visible GPU (transformers 4.40.2 training_args.py:2083
    n_gpu = device_count()) and wraps the model in nn.DataParallel over them (trainer.py:1628-1629), unless the
    script places the model itself with a device_map (hf_device_map over several GPUs: trainer.py:430-433, n_gpu 1: :518)."""
    env, where = run.command.env, run.where
    c.set("gpus_per_node", 1, f"{where} {run.tool} {show(run.target)} (one process)", run.tool)
    if not visible or visible < 2:
        return
    shown = f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']}"
    script = find_file(run.target, None, run.command.path)
    try:
        placed = script is not None and bool(_DEVICE_MAP.search(script.read_text(errors="replace")))
    except OSError:
        placed = False
    fw = FRAMEWORKS.get(c.framework)
    if fw is None or not fw.one_process_dataparallel or placed:
        why = "the script places the model with a device_map" if placed else "not planned for this trainer"
        c.note(f"{shown} with one process (one process over several GPUs: {why}; planned on one GPU)")
        return
    source = (
        f"{shown} with one process ({run.tool} {show(run.target)}): HF's Trainer runs nn.DataParallel over the "
        "visible GPUs (transformers 4.40.2 training_args.py:2083, trainer.py:1628-1629)"
    )
    c.set("gpus_per_node", visible, source, "CUDA_VISIBLE_DEVICES")
    c.set("dataparallel", True, source, "CUDA_VISIBLE_DEVICES")


def _launcher(tool: str) -> str:
    """The launcher a command's tool is, or the one a framework's CLI runs (Tool.wraps: `trl`, `axolotl`)."""
    owned = cli(tool)
    return owned[1].wraps if owned is not None else tool


def _torchrun(c: Collector, run: launch.Run, visible: int | None) -> None:
    """--nproc-per-node, else PET_NPROC_PER_NODE (torch/distributed/argparse_util.py:13-46: its `env` action reads
    PET_<DEST> before the default), else 1 (torch/distributed/run.py:432-439)."""
    env, o = run.command.env, run.opts
    n = o.get("nproc_per_node")
    if n is None and "PET_NPROC_PER_NODE" in env:
        value = env["PET_NPROC_PER_NODE"]
        n = Flag("nproc_per_node", value, f"{run.where} PET_NPROC_PER_NODE={show(value)}", "PET_NPROC_PER_NODE")
    if n is None:
        source = default(TORCH, "torch/distributed/run.py:432-439", "--nproc-per-node 1")
        c.set("gpus_per_node", 1, source, "--nproc_per_node")
    elif show(n.value) in ("gpu", "auto", "cuda"):
        _visible(c, visible, f"{n.source} (one process a visible GPU)", n.raw)
    else:
        processes_fit_devices(c.number("gpus_per_node", n.value, n.source, n.raw), env, n.source, c)
    if "nnodes" in o:
        _nodes(c, o["nnodes"])


def _visible(c: Collector, visible: int | None, source: str, key: str) -> None:
    if visible:
        c.set("gpus_per_node", visible, source, key)
    else:
        c.note(f"{source} (the number of GPUs is the training host's: {ASK_GPUS}")


def _nodes(c: Collector, flag: Flag) -> None:
    text = str(flag.value)
    low = text.split(":")[0]
    if ":" in text and as_int(low):
        c.note(f"{flag.source} (elastic nodes: planned at the fewest, {low})")
    c.number("nodes", low, flag.source, flag.raw)


def _deepspeed(c: Collector, run: launch.Run, visible: int | None) -> None:
    """deepspeed's runner (runner.py:439-520): the hostfile's hosts and slots (-H, default /job/hostfile on the
    training host), narrowed by --include (NAME[:SLOT,...]@...) or by --num_nodes (the first N hosts) and --num_gpus
    (slots 0 to N-1 on each); without a hostfile, the local GPUs: CUDA_VISIBLE_DEVICES's, unless one of those options
    is given, and then the variable is ignored (runner.py:450-461)."""
    o, env, where = run.opts, run.command.env, run.where
    hosts = _hostfile(c, run)
    chosen = [f"--{k} {show(o[k].value)}" for k in ("include", "exclude", "num_gpus", "num_nodes") if k in o]
    if visible and hosts is None and chosen:
        c.note(
            f"{where} CUDA_VISIBLE_DEVICES={env['CUDA_VISIBLE_DEVICES']} beside {', '.join(chosen)}: deepspeed "
            f"ignores the variable then ({DS}:450-461); planned with {chosen[0]}"
        )
    if "exclude" in o:
        c.note(f"{o['exclude'].source} (the GPUs --exclude leaves are not counted: planned without it)")
    include = str(o["include"].value) if "include" in o else ""
    if include and known(include):
        _include(c, o["include"], hosts or {})
    elif "num_gpus" in o:
        c.number("gpus_per_node", o["num_gpus"].value, o["num_gpus"].source, "--num_gpus")
    elif hosts:
        c.set("gpus_per_node", max(hosts.values()), f"{o['hostfile'].source} (slots={max(hosts.values())})", "-H")
    else:
        _visible(c, visible, f"{where} deepspeed (every visible GPU)", "deepspeed")
    if "num_nodes" in o:
        n = as_int(o["num_nodes"].value)
        n = min(n, len(hosts)) if n and hosts else n
        c.number("nodes", n if n is not None else o["num_nodes"].value, o["num_nodes"].source, "--num_nodes")
    elif hosts and not include:
        c.set("nodes", len(hosts), f"{o['hostfile'].source} ({len(hosts)} hosts)", "-H")


def _include(c: Collector, flag: Flag, hosts: dict[str, int]) -> None:
    """--include NAME[:SLOT[,SLOT...]][@NAME...]: a host without slots takes all of its hostfile's."""
    counts = []
    for spec in str(flag.value).split("@"):
        name, colon, slots = spec.partition(":")
        counts.append(len([s for s in slots.split(",") if s.strip()]) if colon else hosts.get(name))
    if None in counts:
        c.note(f"{flag.source} (a host without slots runs all of its GPUs, which its hostfile gives: pass -H FILE)")
    counts = [n for n in counts if n] or [1]
    c.set("gpus_per_node", max(counts), flag.source, "--include")
    if len(counts) > 1:
        c.set("nodes", len(counts), flag.source, "--include")


def _hostfile(c: Collector, run: launch.Run) -> dict[str, int] | None:
    """-H FILE's `host slots=N` lines (runner.py:212-247); None where none is given or it is not found."""
    flag = run.opts.get("hostfile")
    if flag is None or not known(flag.value):
        return None
    path = find_file(show(flag.value), run.command.vars, run.command.path)
    try:
        lines = path.read_text(errors="replace").splitlines()[:4096] if path is not None else None
    except OSError:
        lines = None
    if lines is None:
        c.note(f"{flag.source} (hostfile not found: its hosts and slots are not read; pass it too)")
        return None
    c.add_file(path)
    hosts = {m.group(1): int(m.group(2)) for line in lines if (m := _HOST.match(line.strip()))}
    return hosts or None


def _accelerate(c: Collector, run: launch.Run) -> None:
    o = run.opts
    ref = o.get("config_file") or o.get("accelerate_config")
    found = {}
    if ref is not None and known(ref.value):
        data, path = accelerate.load(show(ref.value), run.command.path, run.command.vars)
        if data is None:
            c.note(
                f"{ref.source} (accelerate config {'unreadable' if path else 'not found'}: its processes and "
                "sharding are not read)"
            )
        else:
            c.add_file(path)
            found = accelerate.entries(c, data, path)
    elif not {"num_processes", "use_deepspeed", "use_fsdp"} & set(o):
        c.note(
            f"{run.where} {run.tool} {'launch' if run.tool == 'accelerate' else show(run.target)} without "
            "--config_file (accelerate's default config on the training host is not read: pass it)"
        )
    merged = found | accelerate.launch_options(o)
    accelerate.apply(
        c, merged, f" (via {ref.source})" if ref is not None and found else "", "--config_file", run.command.path
    )


# the launcher's own node count, per launcher, and how to give it
NODE_FLAG = {"torchrun": "--nnodes", "deepspeed": "--num_nodes (and -H)", "accelerate": "--num_machines"}


def srun(c: Collector, run: launch.Run) -> None:
    """srun starts its tasks (one a node unless --ntasks-per-node or --ntasks says more) on the allocation's nodes
    (its -N, else the #SBATCH header's, slurm.sbatch_environment); a per-node launcher under it joins the nodes only
    where its own node count says so, and a bare python is one process a task (transformers and accelerate read no
    Slurm variable: each task that sets no RANK is a run of its own)."""
    opts = slurm.srun_options([w.text for w in run.before])
    if opts is None:
        return
    v = run.command.vars
    nodes = as_int(opts.get("nodes") or v.get("SLURM_JOB_NUM_NODES") or "")
    tasks = as_int(opts.get("ntasks_per_node") or "")
    if tasks is None and nodes and as_int(opts.get("ntasks") or ""):
        tasks = -(-as_int(opts["ntasks"]) // nodes)
    if tasks is None and "ntasks" not in opts and "nodes" not in opts:
        tasks = as_int(v.get("SLURM_NTASKS_PER_NODE") or "")
    where, what = run.where, f"{run.tool} {show(run.target)}" if run.tool == "python" else run.tool
    if tasks and tasks > 1:
        c.note(
            f"{where} srun starts {tasks} tasks of {what} a node: "
            + (
                "each starts its own processes on the node's GPUs (planned as one)"
                if run.tool != "python"
                else "transformers and accelerate read no Slurm variable, so each task is a run of its own (planned "
                "as one process)"
            )
        )
    mine = c.setting("nodes")
    if not nodes or nodes < 2 or run.tool == "python":
        return
    if mine is None:
        c.note(
            f"{where} srun starts {run.tool} on each of {nodes} nodes and it sets no node count of its own: {nodes} "
            f"runs of one node each, planned as one (give {NODE_FLAG.get(run.tool, '--nnodes')} {nodes} to join them)"
        )
    elif mine.value != nodes:
        c.note(
            f"{where} srun starts {run.tool} on {nodes} nodes and {mine.source} joins {mine.value}: planned at "
            f"{mine.value}, the launcher's"
        )
