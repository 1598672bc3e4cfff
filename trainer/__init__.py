"""The bundled trainer that runs a plan, in one process or under torchrun, DeepSpeed or Slurm: data and the
exact global-batch sampler (data), the run's settings (runconfig), the model's setup (setup), the optimizer steps
(step) with their OOM guard (oom), the training loop (loop), atomic checkpoints (checkpoint) and the process entry
point (main)."""
