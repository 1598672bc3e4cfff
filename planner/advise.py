"""The planner's core API: `suggest` and `check` (with optional verification) on typed requests,
returning the typed results that `--json` prints. The CLI, the REST API and `autotune` all call these.

Torch-free: a probe is run only through the functions a caller hands in (`planner.verification.Probes`, from
probes/ on the faces that have it). Every request is validated before any work: field bounds in its model
(planner/config/requests.py, re-exported here), knob combinations in `planner.config.spec.Knobs`, model configs in
`planner.model.families`; bad input is a `BadInput` naming its field. A request's model, GPUs and goal are resolved in
planner.resolved, its evidence and --verify in planner.verification.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import wraps
from typing import TYPE_CHECKING

from pydantic import ValidationError

from planner.config import requests
from planner.config.knobfields import FIXED, KNOBS, ROLE_FRAMEWORKS
from planner.config.layout import Layout, raise_if
from planner.config.requests import (  # noqa: F401 - the request models, re-exported: every face names them advise.X
    APPROXIMATE_MARGIN,
    DATA_DOC,
    MAX_SUGGESTIONS,
    MODEL_DOC,
    SUGGEST_CHECKPOINTING,
    EvidenceMode,
    ModelRef,
    Nearest,
    Space,
    SuggestRequest,
    SuggestResult,
    Target,
    _Request,
    _Result,
)
from planner.config.spec import (
    GIB,
    LORA_FIELDS,
    MAX_GLOBAL_BATCH,
    MOE_FIELDS,
    Goal,
    Hardware,
    Knobs,
    Plan,
    bad_input,
)
from planner.errors import BadInput
from planner.evidence.store import Shapes
from planner.export.launch import with_launch
from planner.frameworks import FRAMEWORKS, adapter
from planner.model import prequant
from planner.model.modelspec import ModelSpec
from planner.model.shapes import module_name_matches
from planner.resolved import check_positions, default_resolver, hardware_json, resolve, videos_json
from planner.search import imagefit, memo
from planner.search.datafit import Scanner, token_batches, verdict
from planner.search.estimates import budget_plan, make_plan
from planner.search.search import search
from planner.verification import Probes, Status, calibrator, refine, verify

if TYPE_CHECKING:  # built on first use: advise.__getattr__
    from planner.config.requests import CheckRequest, CheckResult, ProbeRequest


def __getattr__(name: str):
    """advise.CheckRequest, CheckResult and ProbeRequest: built on first use (planner.config.requests.LAZY)."""
    if name in requests.LAZY:
        return getattr(requests, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def parse(cls: type[_Request], data: dict) -> _Request:
    """A request from plain data (the CLI's flags, a plan file); bad values are a BadInput naming the field."""
    try:
        return cls.model_validate(data)
    except ValidationError as e:
        raise bad_input(e) from None


def probe_plan(req: ProbeRequest, resolver=default_resolver) -> tuple[ModelSpec, Knobs, Shapes]:
    """What a probe request runs and is stored under: the model, the knobs its backend records
    (Knobs.for_probe) and the shapes; every face builds its probe here, so one request is one store key."""
    model = resolver(req.model)
    w = req.workload
    if w.rl and req.seq_len not in (None, w.seq_len()):
        raise BadInput(
            f"--seq-len {req.seq_len} with --workload {w.kind}: its rows are {w.seq_len()} tokens "
            "(--max-length, or --max-prompt-length + --max-completion-length)",
            "seq_len",
        )
    if w.rl:
        req = req.model_copy(update={"seq_len": w.seq_len()})
    if req.seq_len is None:
        raise BadInput("--seq-len is required (tokens per row)", "seq_len")
    if w.rl and (req.backend == "cuda" or req.zero_stage or req.lora_rank or req.quant != "none"):
        raise BadInput(
            f"--workload {w.kind} probes run one process, zero 0, full fine-tuning, on --backend sim or cpu", "backend"
        )
    check_positions(model, req.seq_len)
    knobs = knobs_of(req, req.precision)
    raise_if(Layout().split_error(knobs, req.micro_batch, req.grad_accum))  # one process
    lora_knobs(req, model)
    shapes = Shapes(micro_batch=req.micro_batch, grad_accum=req.grad_accum, seq_len=req.seq_len)
    return model, knobs.for_probe(req.backend), shapes


def _per_request(answer: Callable) -> Callable:
    """`answer` (suggest, check) with one estimate per configuration within it (planner.search.memo; a nested call
    shares its caller's)."""

    @wraps(answer)
    def call(*args, **kwargs):
        with memo.per_request():
            return answer(*args, **kwargs)

    return call


def _quiet(_: str) -> AbstractContextManager:
    return nullcontext()


@_per_request
def suggest(
    req: SuggestRequest,
    *,
    store: str | None = None,
    probes: Probes | None = None,
    resolver=default_resolver,
    status: Status = _quiet,
    scanner: Scanner | None = None,
    with_nearest: bool = True,
    rejected: str = "always",
) -> SuggestResult:
    """Ranked plans that fit the global batch exactly, and one rejected candidate per knob family; when none fits
    (and `with_nearest`), the nearest settings that do. `rejected`: "always" (every face's JSON), "if-none-fit" (a
    table that shows them only then) or "never" (the nearest settings' own searches): without them the search
    estimates fewer candidates (planner.search.search)."""
    model, hw, goal, fit, budget = resolve(req, req.global_batch, resolver, scanner)
    req = prequant.apply(req, model.config, model.name)  # a GPTQ/AWQ/bitsandbytes checkpoint is its quantized base
    batches = token_batches(req, goal, hw, fit)
    lora_knobs(req, model)
    moe_knobs(req, model, hw)
    space = Space.of(req)
    raise_if(Layout.of(hw, model).global_batch_error(req.workload, req.global_batch))
    cal = calibrator(req, model, store, probes)
    with status(f"planning with {req.evidence} evidence"):
        result = search(model, hw, goal, space, req.top, cal, batches, rejected_too=rejected == "always")
        if rejected == "if-none-fit" and not result.plans:  # the table of rejected families: searched with them
            result = search(model, hw, goal, space, top=req.top, calibrate=cal, batches=batches)
    verified = None
    if result.plans:
        best = refine(result.plans[0], model, hw, goal, cal, status)
        if req.verify:
            best, verified = verify(best, model, hw, goal, cal, probes, status, store)
        result.plans[0] = best
        if not best.fits:  # a probe showed the predicted best does not fit: search again with it
            result = search(model, hw, goal, space, top=req.top, calibrate=cal, batches=batches)
    plans, rejected = ([with_launch(p, model, hw, goal) for p in ps] for ps in (result.plans, result.rejected))
    out = SuggestResult.model_construct(  # its parts are typed and validated already
        model=model.summary(),
        hardware=hardware_json(hw),
        goal=goal.model_dump(),
        plans=plans,
        rejected=rejected,
        verified=verified,
        data=fit.json() if fit else None,
        images=imagefit.with_cut(budget.json(), goal) if budget else None,
        videos=videos_json(req, model),
        nearest=[]
        if result.plans or not with_nearest
        else in_framework_keys(nearest_fits(req, goal, hw, resolver), (rejected or [None])[0], model, hw, goal),
    )
    out._context = (model, hw, goal)
    return out


def knobs_of(req: CheckRequest | ProbeRequest, precision: str) -> Knobs:
    """A one-configuration request's knobs, every rule checked."""
    return Knobs.make(**{k: getattr(req, k) for k in KNOBS if k != "precision"}, precision=precision)


def lora_knobs(req: Target | ProbeRequest, model: ModelSpec) -> dict:
    """The request's LoRA knobs (spec.LORA_FIELDS); --lora-targets names must be the model's linears."""
    if req.lora_vision and model.vision is None:
        raise BadInput(f"--lora-vision: model {model.name!r} has no vision tower", "lora_vision")
    if req.lora_tower_full and model.vision is None:
        raise BadInput(f"--lora-tower-full: model {model.name!r} has no vision tower", "lora_tower_full")
    if req.lora_targets not in ("all-linear", "attention"):
        known = model.linear_names()
        bad = [n for n in req.lora_targets.split(",") if not any(module_name_matches(k, n) for k in known)]
        if bad:
            raise BadInput(
                f"--lora-targets {','.join(bad)}: not a linear of {model.name}; accepted: all-linear, "
                f"attention, or names among {', '.join(sorted(known))}",
                "lora_targets",
            )
    return {f: getattr(req, f) for f in LORA_FIELDS}


def moe_knobs(req: Target, model: ModelSpec, hw: Hardware) -> dict:
    """The request's MoE knobs (spec.MOE_FIELDS), expert parallelism checked against the layout."""
    raise_if(Layout.of(hw, model).expert_error(req.expert_parallel))
    return {f: getattr(req, f) for f in MOE_FIELDS}


def check_knobs(req: CheckRequest, hw: Hardware) -> Knobs:
    precision = req.precision or adapter(req.framework, req.release).precision(hw.gpu.bf16_tflops > 0)
    raise_if(hw.gpu.knob_error(precision, req.attention))
    return knobs_of(req, precision)


@_per_request
def check(
    req: CheckRequest,
    *,
    store: str | None = None,
    probes: Probes | None = None,
    resolver=default_resolver,
    status: Status = _quiet,
    scanner: Scanner | None = None,
    alternatives: bool = True,
) -> CheckResult:
    """One configuration's breakdown, whether it fits, and fitting alternatives with the same global batch (and where
    it does not fit the nearest settings that do; `alternatives` False: neither, the verdict alone)."""
    from planner.search.lengths import limits as rl_limits  # DPO and GRPO's limits

    world = (req.gpus_per_node or 1) * req.nodes
    # the ranks that see different samples: tensor, sequence and context parallel ranks share theirs (the layout
    # refuses a world they do not divide)
    # (an RL run's actor on a group of its own: that group's, planner.config.roles)
    trained = req.workload.roles.actor_gpus(world) if req.framework in ROLE_FRAMEWORKS else world
    data = max(1, trained // (req.tensor_parallel * req.sequence_parallel * req.context_parallel * req.device_map))
    if req.micro_batch * req.grad_accum * data > MAX_GLOBAL_BATCH:
        raise BadInput(
            f"--micro-batch {req.micro_batch} x --grad-accum {req.grad_accum} x data-parallel {data} is over "
            f"the largest global batch, {MAX_GLOBAL_BATCH}",
            "grad_accum",
        )
    model, hw, goal, fit, budget = resolve(req, req.micro_batch * req.grad_accum * data, resolver, scanner)
    req = prequant.apply(req, model.config, model.name)
    knobs = check_knobs(req, hw)
    lora_knobs(req, model)
    Layout.of(hw, model, goal).check_split(knobs, req.micro_batch, req.grad_accum)
    batches = token_batches(req, goal, hw, fit)
    if req.verify and batches is not None:
        raise BadInput(
            "--verify probes a fixed micro-batch; with --max-tokens-per-micro-batch, probe its shapes "
            "with `planner probe`",
            "verify",
        )
    cal = calibrator(req, model, store, probes)
    if cal is not None:
        cal.exact = True
    with status(f"checking with {req.evidence} evidence"):
        if batches is not None:
            plan = budget_plan(model, hw, goal, knobs, batches, req.micro_batch, cal)
        else:
            plan = refine(make_plan(model, hw, goal, knobs, req.micro_batch, cal), model, hw, goal, cal, status)
    verified = None
    if req.verify:
        plan, verified = verify(plan, model, hw, goal, cal, probes, status, store)
    # alternatives: the request's fixed knobs, its precision and the default one (bf16 where the GPU has it), every
    # sharding, offload and checkpointing mode of ZeRO/DDP; a combination the knobs refuse is left out
    if not alternatives:
        out = requests.CheckResult(
            model=model.summary(),
            hardware=hardware_json(hw),
            goal=goal.model_dump(),
            plan=plan,
            suggestions=[],
            text_only=imagefit.text_only(model, goal),
        )
        out._context = (model, hw, goal)
        return out
    default = "bf16" if hw.gpu.bf16_tflops > 0 else "fp16"
    space = Space(
        **{**{k: getattr(req, k) for k in FIXED}, "expert_parallel": 1},
        precision=list(dict.fromkeys([knobs.precision, default])),
        fsdp=list(dict.fromkeys(["off", knobs.fsdp])),  # the plan's own too: context parallel runs on FSDP only
        tensor_parallel=[knobs.tensor_parallel],
        sequence_parallel=[knobs.sequence_parallel],
        context_parallel=[knobs.context_parallel],
        checkpointing=list(SUGGEST_CHECKPOINTING),
        loss=[req.loss],
        attention=[req.attention],
        batching=[req.batching],
    )
    alt_cal = cal.with_mode("auto") if cal is not None else None  # alternatives: stored evidence only
    try:
        found = search(
            model, hw, goal, space, MAX_SUGGESTIONS + 1, alt_cal, batches, rejected_too=False, written=False
        ).plans  # alternatives to the plan's own settings: at a line read but not written, its user's file to edit
    except BadInput:  # no alternative the framework runs (the plan itself was valid): none to offer
        found = []
    alternatives = [p for p in found if (p.micro_batch, p.knobs) != (plan.micro_batch, plan.knobs)][:MAX_SUGGESTIONS]
    plan = with_launch(plan, model, hw, goal)
    alternatives = [with_launch(p, model, hw, goal) for p in alternatives]
    out = requests.CheckResult(
        model=model.summary(),
        hardware=hardware_json(hw),
        goal=goal.model_dump(),
        plan=plan,
        suggestions=alternatives,
        verified=verified,
        data=verdict(fit, plan, model, hw, goal, req.seed) if fit else None,
        images=imagefit.verdict(budget, plan, model, hw, goal) if budget else None,
        videos=videos_json(req, model),
        limits=rl_limits(plan, model, hw, goal) if req.workload.rl else None,
        nearest=[] if plan.fits else in_framework_keys(nearest_fits(req, goal, hw, resolver), plan, model, hw, goal),
        text_only=imagefit.text_only(model, goal),
    )
    out._context = (model, hw, goal)
    return out


def fits_without(change: dict, plan: Plan, req: Target, goal: Goal, hw: Hardware, model: ModelSpec) -> bool:
    """Whether a plan found with a change fits without it, at its own micro-batch (more accumulation on fewer GPUs):
    the request's GPUs, sequence and values of the changed knobs."""
    back = {k: getattr(req, k) for k in change if k in KNOBS}
    try:
        knobs = Knobs(**{**plan.knobs.model_dump(), **back})
    except BadInput:
        return False
    dp = knobs.data_parallel_of(hw.world_size)
    if Layout.of(hw, model, goal).knob_error(knobs) or goal.global_batch % (dp * plan.micro_batch):
        return False
    return make_plan(model, hw, goal, knobs, plan.micro_batch).fits


def nearest_fits(req: Target, goal: Goal, hw: Hardware, resolver=default_resolver) -> list[Nearest]:
    """The requests one change away whose best plan fits (planner.search.nearest), each asked of `suggest`: with the
    request's own knobs where that fits, else with every knob allowed ("any knobs")."""
    from planner.search import nearest  # only where nothing fits

    out, model, found_kinds = [], resolver(req.model), set()
    for label, change, tries in nearest.requests(req, goal, hw):
        kind = label.rstrip("0123456789., ")  # "rollout memory 0.40": the first (largest) value that fits is kept
        if kind in found_kinds:
            continue
        for i, variant in enumerate(tries):
            try:
                found = suggest(variant, resolver=resolver, with_nearest=False, rejected="never")
            except BadInput:
                continue
            if found.plans:
                same = [p for p in found.plans if p.micro_batch == getattr(req, "micro_batch", None)]
                best, own = (same or found.plans)[0], i == 0 and len(tries) == 2
                if change and not own and out and same_plan(best, out[0].plan) and not out[0].changes:
                    break  # with every knob allowed it is the plan this change is not needed for
                if "host_ram_gb" in change and best.memory.host_bytes_per_node <= hw.host_ram_gib * GIB:
                    break  # it fits within the host RAM there is: the change is not what makes it fit
                if change and fits_without(change, best, req, goal, hw, model):
                    break  # its micro-batch fits without the change: the change is not what makes it fit
                out.append(
                    Nearest(change=label if own or not change else f"{label} (any knobs)", changes=change, plan=best)
                )
                found_kinds.add(kind)
                out[-1]._context = found.context
                break
    return out


def in_framework_keys(nearest: list[Nearest], ref: Plan | None, model: ModelSpec, hw: Hardware, goal: Goal):
    """Each nearest setting's changes in its framework's own keys (against `ref`, the plan that does not fit), for
    a plan of another framework than the bundled trainer (whose own flags the nearest settings already are)."""
    if ref is None or FRAMEWORKS[ref.framework].loop == "bundled":
        return nearest
    from planner.export import keys  # only where nothing fits

    before = keys.settings(ref, model, hw, goal.seq_len)
    for n in nearest:
        _, n_hw, n_goal = n._context or (model, hw, goal)  # the changed request's GPUs and sequence
        n.keys = keys.changed(before, keys.settings(n.plan, model, n_hw, n_goal.seq_len))
    return nearest


def same_plan(a: Plan, b: Plan) -> bool:
    """The same split, knobs and predicted figures (a change that moved nothing)."""
    keys = ("micro_batch", "checkpointing", "precision", "zero_stage", "offload", "fsdp", "tokens_per_s")
    return all(getattr(a, k) == getattr(b, k) for k in keys) and (
        a.memory.device_total_bytes == b.memory.device_total_bytes
    )
