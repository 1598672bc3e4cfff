"""The nearest settings that fit: when a request's plans do not fit, the requests one change away that do.

Every face ends a "does not fit" with these (the CLI's table, the API's `nearest`, the web page's table). Each
variant is a suggest request with every knob allowed plus one change (a fused optimizer, LoRA adapters, more
host RAM, twice the GPUs per node or the nodes at the same global batch, half the sequence), asked of the planner itself
(planner.advise.suggest, with analytic evidence): nothing here estimates memory.
"""

from __future__ import annotations

from planner.config.knobfields import GRPO_ROLE_FRAMEWORKS
from planner.config.requests import SUGGEST_CHECKPOINTING, SuggestRequest, Target
from planner.config.spec import FSDP_MODES, Goal, Hardware
from planner.search import role_nearest

EVERY_KNOB = {
    "precision": [],
    "checkpointing": list(SUGGEST_CHECKPOINTING),
    "zero_stage": [0, 1, 2, 3],
    "offload": ["none", "optimizer", "optimizer+params"],
    "fsdp": list(FSDP_MODES),
    "loss": ["standard", "chunked"],
}
LORA_RANK = 16
HOST_RAM_GIB = 2048
GPUS_PER_NODE = 8  # the most a node of the catalog's cards holds (HGX / DGX boards)


def base(req: Target, goal: Goal, hw: Hardware, every_knob: bool) -> dict:
    """The request as a suggest body, its data already read (the planned length): its own knobs (a check's one
    value each, a suggest's lists), or every knob allowed."""
    fields = req.model_dump(
        include=set(Target.model_fields),
        exclude={"data", "tokenizer", "image_rule", "seed", "images", "tokens_per_image", "verify"},
    )
    fields.update(
        evidence="analytic",
        global_batch=goal.global_batch,
        top=1 if getattr(req, "micro_batch", None) is None else 50,  # a check's: its own micro-batch preferred
        gpus_per_node=hw.gpus_per_node,
        image_tokens=goal.image_tokens or None,
    )
    if not req.workload.rl:
        fields.update(seq_len=goal.seq_len, max_length=None)
    for name in (*EVERY_KNOB, "attention", "batching"):  # a check's one value, a suggest's list
        value = getattr(req, name, None)
        if value is not None:
            fields[name] = list_of(value)
    if every_knob:
        fields.update(EVERY_KNOB)
    return fields


def list_of(value) -> list:
    return list(value) if isinstance(value, list) else [value]


def variants(req: Target, goal: Goal, hw: Hardware) -> list[tuple[str, dict]]:
    """(label, the changed fields) of each request one change away, the label in words every face can show."""
    every = all(set(v) <= set(getattr(req, k, None) or []) for k, v in EVERY_KNOB.items() if v)
    out = [] if every else [("every knob allowed", {})]
    if req.workload.role_run or (req.workload.kind == "grpo" and req.framework in GRPO_ROLE_FRAMEWORKS):
        out += role_nearest.variants(req, goal)
    if req.optimizer == "adamw":
        out.append(("optimizer adamw-fused", {"optimizer": "adamw-fused"}))
    if not req.lora_rank:
        out.append((f"LoRA rank {LORA_RANK}", {"lora_rank": LORA_RANK}))
    if req.host_ram_gb < HOST_RAM_GIB:
        out.append((f"{HOST_RAM_GIB} GiB host RAM per node", {"host_ram_gb": HOST_RAM_GIB}))
    if goal.global_batch % (2 * hw.world_size) == 0:  # more GPUs at the same global batch: on this node, or more
        if 2 * hw.gpus_per_node <= GPUS_PER_NODE:
            out.append((f"{2 * hw.gpus_per_node} GPUs per node", {"gpus_per_node": 2 * hw.gpus_per_node}))
        out.append((f"{2 * hw.nodes} nodes", {"nodes": 2 * hw.nodes}))
    if req.eval_logits_steps > 1:  # logits kept for compute_metrics: one step's on the GPU at a time
        out.append(("eval_accumulation_steps 1", {"eval_logits_steps": 1}))
    if req.eval_batch > 1:  # a run whose evaluation is its peak: the evaluation's own batch
        out.append(("evaluation batch 1", {"eval_batch": 1}))
    half = goal.seq_len // 2
    if not req.workload.rl and half >= max(1, goal.image_tokens) and req.max_tokens_per_micro_batch is None:
        out.append((f"sequence length {half}", {"seq_len": half}))
    return out


def requests(req: Target, goal: Goal, hw: Hardware) -> list[tuple[str, dict, list[SuggestRequest]]]:
    """The variants as suggest requests: with the request's own knobs first, then with every knob allowed (a
    request the request model refuses is left out)."""
    own, every, out = base(req, goal, hw, False), base(req, goal, hw, True), []
    for label, change in variants(req, goal, hw):
        tries = []
        for body in [every] if not change else [own, every]:
            try:
                tries.append(SuggestRequest.model_validate({**body, **change}))
            except ValueError:
                continue
        out.append((label, change, tries))
    return out
