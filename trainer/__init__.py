"""The bundled trainer that runs a plan (torchrun or DeepSpeed). Empty until the trainer issue lands."""
