"""Probes that turn estimates into measurements: the allocation tracker (tracker), the fake-tensor
simulation (sim, with CUDA's autocast policy in amp), real CPU and CUDA steps (cpu, cuda, step), the
multi-rank CPU probe under torchrun/DeepSpeed (dist) and the isolated runner that classifies outcomes (run).

The planner core never imports this package except on the simulation and probe paths.
"""
