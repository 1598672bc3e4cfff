"""How a LLaMA-Factory configuration is told from its content (Framework.signs, planner.intake.configs.kind): its
0.9 YAML by the keys only it writes, and its experimental v1 schema (USE_V1=1), known and refused."""

from planner.frameworks.tool import Signs

KEYS = {"stage", "finetuning_type", "cutoff_len", "lora_target", "template", "dataset_dir", "pure_bf16"}
V1 = "LLaMA-Factory's experimental v1 schema (USE_V1=1) is not read"
SIGNS = (
    Signs("lf-v1", lambda k, d: "dist_config" in k or {"model", "micro_batch_size"} <= k, 50, refused=V1),
    Signs("llamafactory", lambda k, d: bool(k & KEYS) and "model" not in k, 60),
)
