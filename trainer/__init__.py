"""The bundled trainer that runs a plan, in one process or under torchrun, DeepSpeed or Slurm: data and the
exact global-batch sampler (data), the training loop with its OOM guard (loop), atomic checkpoints
(checkpoint) and the process entry point (main)."""
