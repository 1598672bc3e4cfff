"""Probes that turn estimates into measurements: the allocation tracker (tracker), the fake-tensor
simulation (sim, with CUDA's autocast policy in amp), real CPU and CUDA steps (cpu, cuda, step), the
multi-rank CPU probe under torchrun/DeepSpeed (dist) and the isolated runner that classifies outcomes (run).

The planner core never imports this package except on the simulation and probe paths.
"""


def probe_functions():
    """The probes the core may run (planner.verification.Probes) on any face (CLI, API), or None where what a sim step
    needs (torch, transformers: the sim extra) is not installed; the core then refuses sim evidence and --verify
    in one line. Imports nothing heavy until a probe runs."""
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("torch", "transformers")):
        return None
    from planner.verification import Probes

    return Probes(simulate=_simulate, isolated=_isolated, reserved=_reserved)


def _simulate(model, config, knobs, shapes):
    from probes.run import probe_in_process  # on first use: a plan that runs no probe imports none of it

    return probe_in_process(model, config, knobs, shapes, "sim")


def _isolated(*args, **kwargs):
    from probes.run import run_isolated

    return run_isolated(*args, **kwargs)


def _reserved(model, config, knobs, shapes, limit_bytes):
    from probes.reserved import replay_detail

    return replay_detail(config, knobs, shapes, limit_bytes)
