"""The bundled trainer's setup, on its Trainer `t`: the model built and split (tensor and sequence parallel) and
sharded (FSDP2), the samples with the held-out evaluation share and the exact global-batch sampler, the plan's
optimizer, DeepSpeed's engine or the ranks' equal start, the router aux loss, and the checkpoint's step with --resume;
and what the trainer refuses to split over sequence or tensor parallel ranks."""

from __future__ import annotations

import torch
import torch.distributed as dist

from recipe.model import vocab_of
from trainer import checkpoint
from trainer.data import GlobalBatchSampler, load
from trainer.model import build_model
from trainer.runconfig import RunConfig


def refuse_parallel(t, cfg: RunConfig) -> None:
    """What the bundled trainer does not split over sequence or tensor parallel ranks, in one line."""
    if t.par.sp * t.par.tp == 1:
        return
    from planner.errors import BadInput

    for given, what in (
        (cfg.max_tokens_per_micro_batch, "--max-tokens-per-micro-batch"),
        (cfg.processor, "--processor (images)"),
        (cfg.save_dir, "--save-dir (checkpoints)"),
        (cfg.eval_every, "--eval-every"),
    ):
        if given:
            raise BadInput(f"{what} with --sequence-parallel or --tensor-parallel: not run by the bundled trainer yet")


def setup(t) -> None:
    """Everything a step needs, set on `t` (a trainer.step.Trainer) in the order the ranks must agree on."""
    cfg = t.cfg
    model = _model(t, cfg)
    _data(t, cfg, vocab_of(model))
    opt, sched = _optimizer(t, cfg, model)
    _engine(t, cfg, model, opt, sched)
    t.model.train()
    from trainer.router import RouterAux

    t.router = RouterAux.maybe(t.model)  # an MoE config with its router aux loss on, else None
    if t.router and t.par.sp > 1:
        from planner.errors import BadInput

        raise BadInput("--sequence-parallel with a router aux loss: not run by the bundled trainer yet")
    if cfg.resume and cfg.save_dir:
        state = checkpoint.load_latest(t)
        if state:
            t.step, t.micro, t.accum = state["step"], state["micro_batch"], state["grad_accum"]
            t.budget = state.get("max_tokens_per_micro_batch", t.budget)


def _model(t, cfg: RunConfig):
    """The plan's model on this rank's device: its tensor-parallel columns or rows, Ulysses' attention, FSDP2's shards."""
    model = build_model(cfg).to(t.device)
    if t.par.tp > 1:  # every rank built the same seeded model; each keeps its columns or rows
        from recipe.parallel import shard_tensor_parallel

        shard_tensor_parallel(model, t.par.mesh["tp"])
    if t.par.sp > 1:
        from recipe.parallel import use_ulysses

        use_ulysses(model, t.par.group("sp"))
    if t.fsdp:  # every rank built the same seeded model; each keeps its shards
        from recipe import shard_fsdp

        mesh = t.par.shard_mesh() if t.par.tp > 1 else None
        model = shard_fsdp(model, cfg.knobs, t.device.type, mesh)
    return model


def _data(t, cfg: RunConfig, vocab: int) -> None:
    """The samples (a processor's rows with images, or token rows), the held-out evaluation share and the sampler."""
    t.processor = None
    if cfg.processor:  # rows with images, made into the model's inputs by the user's processor
        from trainer import vlm

        vlm.check_batching(cfg.knobs.batching)
        t.processor = vlm.load_processor(cfg.processor)
        t.samples = vlm.load(cfg.data, cfg.seq_len, vocab, t.processor)
    else:
        t.samples = load(cfg.data, cfg.seq_len, vocab, cfg.tokenizer, cfg.seed)
    t.eval_samples: list[list[int]] = []
    if cfg.eval_every:  # a held-out 5% (at least one sample), never trained on
        cut = max(1, len(t.samples) // 20)
        t.samples, t.eval_samples = t.samples[:-cut], t.samples[-cut:]
    t.eval_batch = cfg.eval_batch
    t.lengths = [min(len(s), cfg.seq_len) for s in t.samples]
    t.sampler = GlobalBatchSampler(len(t.samples), t.global_batch, t.par.dp, t.par.dp_rank, cfg.seed)


def _optimizer(t, cfg: RunConfig, model):
    """(The plan's optimizer, a constant schedule); autocast's dtype and the fp16 grad scaler on `t`."""
    params = [p for p in model.parameters() if p.requires_grad]
    from recipe import make_optimizer

    try:  # the plan's optimizer (one per parameter, stepped inside backward, with --optimizer-in-backward)
        if cfg.knobs.optimizer_in_backward:
            from recipe.in_backward import InBackward

            opt = InBackward(params, cfg.knobs.optimizer, cfg.lr)
        else:
            opt = make_optimizer(params, cfg.knobs.optimizer, cfg.lr)
    except ValueError as e:
        from planner.errors import BadInput

        raise BadInput(f"--optimizer {cfg.knobs.optimizer}: {e}") from None
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    t.amp = None  # FSDP: its MixedPrecisionPolicy casts, no autocast
    if not t.ds and not t.fsdp and cfg.knobs.precision in ("bf16", "fp16"):
        t.amp = torch.bfloat16 if cfg.knobs.precision == "bf16" else torch.float16
    t.scaler = torch.amp.GradScaler(t.device.type, enabled=t.amp == torch.float16)
    return opt, sched


def _engine(t, cfg: RunConfig, model, opt, sched) -> None:
    """DeepSpeed's engine around them (zero >= 1), else every rank starts from rank 0's weights (FSDP shards agree)."""
    if t.ds:
        import deepspeed

        from recipe.dist import client_optimizer_config

        ds_cfg = client_optimizer_config(cfg.deepspeed_config or {})
        ds_cfg.update(
            train_micro_batch_size_per_gpu=t.micro,
            gradient_accumulation_steps=t.accum,
            train_batch_size=t.global_batch,
        )
        t.engine, t.opt, _, t.sched = deepspeed.initialize(
            model=model, optimizer=opt, lr_scheduler=sched, config=ds_cfg
        )
        t.model = t.engine.module
    else:
        if t.world > 1 and not t.fsdp:
            for p in model.parameters():
                dist.broadcast(p.data, 0)
        t.model, t.opt, t.sched, t.engine = model, opt, sched, None
