"""The bundled trainer: runs one plan (micro-batch x accumulation x world == global batch) on torch or
DeepSpeed, on CPU (gloo) or CUDA (nccl), with exact global batches, checkpoint/resume and a runtime OOM
guard.

Loss: the sum of token losses of the whole global batch (all micro-steps, all ranks) divided by its
number of target tokens, counted before the first micro-step (one all-reduce), so every split of the
same global batch gives the same update.

Gradient reduction (zero 0): each rank accumulates its micro-steps locally and the gradients are
summed across ranks once per optimizer step (one all-reduce per parameter bucket after the last
micro-step: DDP's traffic with `no_sync` on the non-final micro-steps, without overlapping it with
the last backward). Nothing is communicated inside backward, which is what lets every rank learn of
an out-of-memory error on any rank (one flag all-reduce after each micro-step) and redo the step
with half the micro-batch and twice the accumulation, from its first micro-batch, without losing or
repeating a sample. DeepSpeed (zero >= 1) reduces inside backward: an OOM there ends the run (the
event is still recorded in the probe store).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist

from planner.config.spec import Knobs
from planner.search.batching import check_budget
from recipe import allocate_ranks
from trainer import checkpoint
from trainer.data import GlobalBatchSampler, collate, load, micro_batches, target_tokens, token_micro_batches
from trainer.model import build_model, token_loss_sum

GRAD_CLIP = 1.0  # as the exported DeepSpeed config (gradient_clipping) and HF's max_grad_norm


@dataclass
class RunConfig:
    """One training process's run: the plan's knobs (planner.config.spec.Knobs, the one configuration object, so
    every rule of it holds here too), its shapes, and the run's own settings."""

    model: str
    micro_batch: int
    grad_accum: int
    seq_len: int
    knobs: Knobs = field(default_factory=lambda: Knobs(precision="fp32"))
    data: str = "synthetic"
    tokenizer: str | None = None
    processor: str | None = None  # a VLM's local processor folder: --data rows with images (trainer/vlm.py)
    max_steps: int = 10
    lr: float = 1e-3
    seed: int = 0
    log: str | None = None
    device: str | None = None
    save_dir: str | None = None
    save_every: int = 0
    resume: bool = False
    store: str | None = None
    deepspeed_config: dict | None = None
    eval_every: int = 0
    eval_batch: int = 8
    max_tokens_per_micro_batch: int | None = None  # token-budget micro-batches (planner.search.batching)
    grad_clip: float = GRAD_CLIP  # max gradient norm; 0: none (always none with --optimizer-in-backward)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.knobs, dict):  # as read back from the run file
            self.knobs = Knobs.make(**self.knobs)
        if self.max_tokens_per_micro_batch is not None:
            check_budget(self.max_tokens_per_micro_batch, self.seq_len)

    def to_json(self) -> dict:
        return {**asdict(self), "knobs": self.knobs.model_dump()}


class OOMInjector:
    """MEMPLAN_TRAIN_INJECT_OOM=step:micro:rank raises torch's real OutOfMemoryError there, once."""

    def __init__(self) -> None:
        spec = os.environ.get("MEMPLAN_TRAIN_INJECT_OOM", "")
        self.at = tuple(int(x) for x in spec.split(":")) if spec else None

    def check(self, step: int, micro: int, rank: int) -> None:
        if self.at == (step, micro, rank):
            self.at = None
            raise torch.OutOfMemoryError("injected: CUDA out of memory (MEMPLAN_TRAIN_INJECT_OOM)")


class Trainer:
    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", "0"))
        want = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.device = torch.device(f"cuda:{local}" if want == "cuda" else "cpu")
        if want == "cuda":
            torch.cuda.set_device(self.device)
        self.backend = "nccl" if want == "cuda" else "gloo"
        self.ds = cfg.knobs.zero_stage >= 1
        self.fsdp = cfg.knobs.fsdp != "off"
        self.collective_backward = self.ds or self.fsdp  # gradients are reduced inside every rank's backward
        if self.collective_backward and "RANK" not in os.environ:  # no launcher: a world of one on loopback
            from recipe.dist import free_port

            os.environ.update(
                RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())
            )
        if self.ds:
            from recipe.dist import init_deepspeed

            init_deepspeed(self.backend, cpu=want == "cpu")
        elif self.world > 1 or self.fsdp:
            dist.init_process_group(self.backend)
        from recipe.parallel import Mesh

        k = cfg.knobs
        self.par = Mesh.make(self.world, self.rank, k.sequence_parallel, k.tensor_parallel, self.device.type)
        self._refuse_parallel(cfg)
        if self.fsdp and cfg.knobs.loss != "standard":
            from planner.errors import BadInput

            raise BadInput(
                f"--loss {cfg.knobs.loss} with --fsdp: the bundled trainer computes it outside the FSDP root's "
                "forward; run it under DDP or ZeRO, or HF's Trainer with use_liger_kernel",
                "loss",
            )
        self.micro, self.accum = cfg.micro_batch, cfg.grad_accum
        self.budget = cfg.max_tokens_per_micro_batch
        self.global_batch = cfg.micro_batch * cfg.grad_accum * self.par.dp
        self.step = 0
        self.stop_requested = False
        self.oom = OOMInjector()
        self.events: list[dict] = []
        self._setup()

    def _refuse_parallel(self, cfg: RunConfig) -> None:
        """What the bundled trainer does not split over sequence or tensor parallel ranks, in one line."""
        if self.par.sp * self.par.tp == 1:
            return
        from planner.errors import BadInput

        for given, what in (
            (cfg.max_tokens_per_micro_batch, "--max-tokens-per-micro-batch"),
            (cfg.processor, "--processor (images)"),
            (cfg.save_dir, "--save-dir (checkpoints)"),
            (cfg.eval_every, "--eval-every"),
        ):
            if given:
                raise BadInput(
                    f"{what} with --sequence-parallel or --tensor-parallel: not run by the bundled trainer yet"
                )

    # -- setup ------------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg = self.cfg
        model = build_model(cfg).to(self.device)
        if self.par.tp > 1:  # every rank built the same seeded model; each keeps its columns or rows
            from recipe.parallel import shard_tensor_parallel

            shard_tensor_parallel(model, self.par.mesh["tp"])
        if self.par.sp > 1:
            from recipe.parallel import use_ulysses

            use_ulysses(model, self.par.group("sp"))
        if self.fsdp:  # every rank built the same seeded model; each keeps its shards
            from recipe import shard_fsdp

            mesh = self.par.shard_mesh() if self.par.tp > 1 else None
            model = shard_fsdp(model, cfg.knobs, self.device.type, mesh)
        vocab = model.get_input_embeddings().num_embeddings
        self.processor = None
        if cfg.processor:  # rows with images, made into the model's inputs by the user's processor
            from trainer import vlm

            vlm.check_batching(cfg.knobs.batching)
            self.processor = vlm.load_processor(cfg.processor)
            self.samples = vlm.load(cfg.data, cfg.seq_len, vocab, self.processor)
        else:
            self.samples = load(cfg.data, cfg.seq_len, vocab, cfg.tokenizer, cfg.seed)
        self.eval_samples: list[list[int]] = []
        if cfg.eval_every:  # a held-out 5% (at least one sample), never trained on
            cut = max(1, len(self.samples) // 20)
            self.samples, self.eval_samples = self.samples[:-cut], self.samples[-cut:]
        self.eval_batch = cfg.eval_batch
        self.lengths = [min(len(s), cfg.seq_len) for s in self.samples]
        self.sampler = GlobalBatchSampler(len(self.samples), self.global_batch, self.par.dp, self.par.dp_rank, cfg.seed)
        params = [p for p in model.parameters() if p.requires_grad]
        from recipe import make_optimizer

        try:  # the plan's optimizer (one per parameter, stepped inside backward, with --optimizer-in-backward)
            if cfg.knobs.optimizer_in_backward:
                from recipe.knobs import InBackward

                opt = InBackward(params, cfg.knobs.optimizer, cfg.lr)
            else:
                opt = make_optimizer(params, cfg.knobs.optimizer, cfg.lr)
        except ValueError as e:
            from planner.errors import BadInput

            raise BadInput(f"--optimizer {cfg.knobs.optimizer}: {e}") from None
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
        self.amp = None  # FSDP: its MixedPrecisionPolicy casts, no autocast
        if not self.ds and not self.fsdp and cfg.knobs.precision in ("bf16", "fp16"):
            self.amp = torch.bfloat16 if cfg.knobs.precision == "bf16" else torch.float16
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=self.amp == torch.float16)
        if self.ds:
            import deepspeed

            from recipe.dist import client_optimizer_config

            ds_cfg = client_optimizer_config(cfg.deepspeed_config or {})
            ds_cfg.update(
                train_micro_batch_size_per_gpu=self.micro,
                gradient_accumulation_steps=self.accum,
                train_batch_size=self.global_batch,
            )
            self.engine, self.opt, _, self.sched = deepspeed.initialize(
                model=model, optimizer=opt, lr_scheduler=sched, config=ds_cfg
            )
            self.model = self.engine.module
        else:
            if self.world > 1 and not self.fsdp:
                for p in model.parameters():
                    dist.broadcast(p.data, 0)
            self.model, self.opt, self.sched, self.engine = model, opt, sched, None
        self.model.train()
        from trainer.router import RouterAux

        self.router = RouterAux.maybe(self.model)  # an MoE config with its router aux loss on, else None
        if self.router and self.par.sp > 1:
            from planner.errors import BadInput

            raise BadInput("--sequence-parallel with a router aux loss: not run by the bundled trainer yet")
        if cfg.resume and cfg.save_dir:
            state = checkpoint.load_latest(self)
            if state:
                self.step, self.micro, self.accum = state["step"], state["micro_batch"], state["grad_accum"]
                self.budget = state.get("max_tokens_per_micro_batch", self.budget)

    # -- collectives --------------------------------------------------------------------------
    def _sum(self, x: float, op=dist.ReduceOp.SUM) -> float:
        if self.world == 1:
            return x
        t = torch.tensor([x], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=op)
        return float(t.item())

    def _reduce_grads(self) -> None:
        if self.world == 1:
            return
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        for bucket in torch._utils._take_tensors(grads, 25 * 2**20):
            flat = torch._utils._flatten_dense_tensors(bucket)
            dist.all_reduce(flat)
            for g, r in zip(bucket, torch._utils._unflatten_dense_tensors(flat, bucket)):
                g.copy_(r)

    # -- one optimizer step ---------------------------------------------------------------------
    def _micro_step(self, batch, n_tokens: float, micro: int) -> torch.Tensor:
        self.oom.check(self.step, micro, self.rank)
        batch = {k: v.to(self.device) for k, v in batch.items()}
        if self.par.sp > 1:  # this rank's slice of every row (recipe.parallel)
            from recipe.parallel import local_slice

            batch = local_slice(batch, self.par.sp, self.par.mesh["sp"].get_local_rank())
        if self.router:
            self.router.record(True)
        with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
            loss_sum = token_loss_sum(self.model if not self.ds else self.engine, batch, self.cfg.knobs)
        loss = loss_sum / n_tokens
        if self.router:  # this micro-batch's share of the global batch's router aux loss (trainer/router.py)
            loss = loss + self.router.term(batch)
            self.router.record(False)
        if self.ds:  # DeepSpeed averages over ranks and divides by accumulation: undo both
            self.engine.backward(loss * self.world * self.accum)
            self.engine.step()
        else:  # FSDP averages the gradients over its ranks (gloo has no pre-scaled sum): undo it
            self.scaler.scale(loss * (self.world // self.par.tp if self.fsdp else 1)).backward()
        return loss_sum.detach()  # read once a step: no device sync between micro-steps

    @torch.no_grad()
    def _forward(self, batch: dict) -> None:
        """A forward without gradients (the router aux loss's routing pass, trainer/router.py)."""
        with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
            token_loss_sum(
                self.model if not self.ds else self.engine,
                {k: v.to(self.device) for k, v in batch.items()},
                self.cfg.knobs,
            )

    def _max(self, x: float) -> float:
        return self._sum(x, dist.ReduceOp.MAX)

    def _peak(self) -> int | None:
        return torch.cuda.max_memory_allocated(self.device) if self.device.type == "cuda" else None

    def _attempt(self, indices: list[int]):
        """One try at the step's micro-steps: (token loss sum here, target tokens of the global
        batch, start time), or None when some rank ran out of memory (every rank learns it)."""
        t0 = time.perf_counter()
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
        batches = [self._collate([self.samples[i] for i in g]) for g in self._groups(indices)]
        n_tokens = self._sum(sum(target_tokens(b) for b in batches)) / (self.par.sp * self.par.tp)  # each sample once
        if self.collective_backward:  # an empty micro-step: every rank runs it, here with no target
            batches = [b if b["input_ids"].numel() else self._no_target() for b in batches]
        if self.router:
            self.router.route(batches, self._forward, self.world, self.device)
        loss_sum = 0.0
        for m, batch in enumerate(batches):
            oom = 0.0
            if self.ds and self.budget:  # a varying count of micro-steps: the last one is the boundary
                self.engine.set_gradient_accumulation_boundary(m == len(batches) - 1)
            if self.fsdp:  # reduce-scatter on the last micro-step only
                self.model.set_requires_gradient_sync(m == len(batches) - 1)
            if batch["input_ids"].numel():
                try:
                    loss_sum += self._micro_step(batch, n_tokens, m)
                except torch.OutOfMemoryError as e:
                    self._record_oom(str(e))
                    if self.collective_backward or self.cfg.knobs.optimizer_in_backward:
                        raise  # collectives are mid-flight on other ranks / parameters already stepped
                    oom = 1.0
            if not self.collective_backward and self._max(oom):  # (they raise instead)
                return None
        return loss_sum, n_tokens, t0, len(batches)

    def _no_target(self) -> dict:
        batch = collate([[0, 0]], self.cfg.seq_len)
        batch["labels"][:] = -100
        batch["router_mask"] = torch.zeros_like(batch["input_ids"])  # nor routed tokens of the aux loss
        return batch

    def _collate(self, samples: list) -> dict:
        """A padded micro-batch, or one packed row of its samples (--batching packed); with images, the processor's."""
        if self.processor is not None and samples:
            from trainer import vlm

            return vlm.collate(self.processor, samples)
        if self.cfg.knobs.batching == "packed" and samples:
            from recipe.knobs import pack

            return pack([s[: self.cfg.seq_len] for s in samples])
        return collate(samples, self.cfg.seq_len)

    def _groups(self, indices: list[int]) -> list[list[int]]:
        """This step's micro-batches: `accum` of `micro` samples, or cut by the token budget and padded with empty
        ones to the most any rank has (every rank runs as many micro-steps)."""
        if not self.budget:
            return micro_batches(indices, self.micro, self.accum)
        groups = token_micro_batches(indices, self.lengths, self.budget)
        return groups + [[]] * (int(self._max(float(len(groups)))) - len(groups))

    def _shrink(self) -> None:
        """After an OOM: free what the failed try held; the next smaller micro-batch (half when even)
        and the accumulation that keeps the global batch."""
        from planner.search.search import divisors

        self.opt.zero_grad(set_to_none=True)
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        if self.budget:  # half the token budget, while it still holds a sample of seq_len
            if self.budget // 2 < self.cfg.seq_len:
                raise RuntimeError(
                    f"out of memory at a token budget of {self.budget}: half of it cannot hold a "
                    f"sample of {self.cfg.seq_len} tokens"
                )
            self.budget //= 2
            self.events.append({"step": self.step + 1, "event": "oom", "max_tokens_per_micro_batch": self.budget})
            return
        per_rank = self.micro * self.accum
        smaller = [d for d in divisors(per_rank) if d <= self.micro // 2]
        if not smaller:
            raise RuntimeError(f"out of memory at micro-batch {self.micro}: nothing smaller to try")
        self.micro = smaller[-1]
        self.accum = per_rank // self.micro
        self.events.append({"step": self.step + 1, "event": "oom", "micro_batch": self.micro, "grad_accum": self.accum})

    def _record_oom(self, message: str) -> None:
        """The event goes to the probe store, so the next plan for this model starts lower."""
        try:
            from planner.evidence.store import Shapes, Store, make_record
            from planner.model.catalog import load_model

            cfg = self.cfg
            spec = load_model(cfg.model)
            knobs = cfg.knobs
            shapes = Shapes(micro_batch=self.micro, grad_accum=self.accum, seq_len=cfg.seq_len, world_size=self.world)
            device = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
            rec = make_record(
                spec.name,
                spec.config,
                knobs,
                shapes,
                self.device.type,
                "oom",
                device,
                peak_allocated_bytes=self._peak(),
                detail={"error": message[:500], "source": "trainer"},
            )
            store = Store(cfg.store)  # written by the rank that ran out of memory
            store.add(rec)
            store.close()
        except Exception as e:  # noqa: BLE001 (recording must never hide the OOM being handled)
            self.events.append({"event": "oom-record-failed", "error": str(e)[:200]})

    def train_step(self) -> dict:
        indices = self.sampler.next()
        longest = int(self._max(float(max((min(len(self.samples[i]), self.cfg.seq_len) for i in indices), default=0))))
        attempt = self._attempt(indices)
        while attempt is None:
            self._shrink()
            attempt = self._attempt(indices)
        loss_sum, n_tokens, t0, attempt_steps = attempt
        if not self.ds:
            if not self.fsdp:
                self._reduce_grads()
            self.scaler.unscale_(self.opt)
            if self.cfg.grad_clip and not self.cfg.knobs.optimizer_in_backward:  # stepped in backward: no norm
                if self.par.tp > 1:  # weights on two meshes
                    from recipe.parallel import clip_grad_norm_

                    clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
                else:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip)
            self.scaler.step(self.opt)
            self.scaler.update()
            self.sched.step()
            allocate_ranks(self.model, self.step + 1)  # AdaLoRA's rank allocator (recipe), before zero_grad
            self.opt.zero_grad(set_to_none=True)
        self.step += 1
        loss_sum = self._sum(float(loss_sum)) / self.par.tp  # tensor-parallel ranks compute the same loss
        seconds = time.perf_counter() - t0
        return {
            "step": self.step,
            "loss": loss_sum / max(n_tokens, 1),
            "tokens": int(n_tokens),
            "tokens_per_s": round(n_tokens / seconds, 1),
            "step_time_s": round(seconds, 4),
            "peak_allocated_bytes": self._peak(),
            "micro_batch": self.micro,
            "grad_accum": self.accum,
            "lr": self.sched.get_last_lr()[0],
            "longest_sample_tokens": longest,
            **({"aux_loss": self.router.value} if self.router else {}),
            **({"max_tokens_per_micro_batch": self.budget, "micro_steps": attempt_steps} if self.budget else {}),
        }

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Token-mean loss on the held-out samples, this rank's share, in batches of its own size;
        an OOM halves the evaluation batch only (the training micro-batch is never touched)."""
        mine = self.eval_samples[self.rank :: self.world]
        model = self.engine if self.ds else self.model
        model.eval()
        i, loss_sum, tokens = 0, 0.0, 0
        while i < len(mine):
            batch = self._collate(mine[i : i + self.eval_batch])
            try:
                if os.environ.pop("MEMPLAN_TRAIN_INJECT_EVAL_OOM", "") and self.eval_batch > 1:
                    raise torch.OutOfMemoryError("injected: CUDA out of memory in evaluation")
                with torch.autocast(self.device.type, dtype=self.amp, enabled=self.amp is not None):
                    loss_sum += float(
                        token_loss_sum(model, {k: v.to(self.device) for k, v in batch.items()}, self.cfg.knobs)
                    )
            except torch.OutOfMemoryError:
                if self.eval_batch == 1:
                    raise
                self.eval_batch //= 2
                gc.collect()
                continue
            tokens += target_tokens(batch)
            i += len(batch["input_ids"])
        model.train()
        n = self._sum(tokens)
        return {
            "step": self.step,
            "eval_loss": self._sum(loss_sum) / max(n, 1),
            "eval_tokens": int(n),
            "eval_batch": self.eval_batch,
        }


def run(cfg: RunConfig) -> list[dict]:
    """Train cfg.max_steps optimizer steps (from the checkpoint with --resume); rank 0 logs one JSON
    line per step to cfg.log and shows a progress bar. SIGTERM saves a checkpoint and stops."""
    t = Trainer(cfg)
    delay = float(os.environ.get("MEMPLAN_TRAIN_STEP_DELAY_S", "0"))  # tests: time to interrupt a run
    signal.signal(signal.SIGTERM, lambda *_: setattr(t, "stop_requested", True))
    rows: list[dict] = []
    if cfg.log and t.rank == 0:
        Path(cfg.log).parent.mkdir(parents=True, exist_ok=True)
        checkpoint.trim_log(Path(cfg.log), t.step)  # rows past the checkpoint are trained again: no duplicates
    log = open(cfg.log, "a") if cfg.log and t.rank == 0 else None  # noqa: SIM115
    recorder = None
    if cfg.store:  # each step into the store for `planner runs` (trainer/runlog.py)
        from trainer.runlog import StepRecorder

        recorder = StepRecorder(cfg, t.rank)
    saved = t.step
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from trainer.console import err_console

    bar = Progress(
        TextColumn("step {task.completed}/{task.total}"),
        BarColumn(),
        TextColumn("{task.description}"),
        TimeRemainingColumn(),
        console=err_console(),
        disable=t.rank != 0,
    )
    try:
        with bar:
            task = bar.add_task("", total=cfg.max_steps, completed=t.step)
            while t.step < cfg.max_steps:
                row = t.train_step()
                time.sleep(delay)
                rows.append(row)
                if recorder:
                    recorder.add(row, t.device)
                if log:
                    log.write(json.dumps(row) + "\n")
                    log.flush()
                if cfg.eval_every and t.step % cfg.eval_every == 0:
                    ev = t.evaluate()
                    if log:
                        log.write(json.dumps(ev) + "\n")
                        log.flush()
                bar.update(
                    task, completed=t.step, description=f"loss {row['loss']:.4f}, {row['tokens_per_s']:.0f} tok/s"
                )
                stop = t._max(1.0 if t.stop_requested else 0.0)
                if cfg.save_dir and (
                    stop or (cfg.save_every and t.step % cfg.save_every == 0) or t.step == cfg.max_steps
                ):
                    checkpoint.save(t)
                    saved = t.step
                if stop:
                    break
        if cfg.save_dir and saved != t.step:
            checkpoint.save(t)
        if t.rank == 0 and rows:
            err_console().print(
                f"done: {t.step} steps, last loss {rows[-1]['loss']:.4f}, "
                f"{sum(r['tokens'] for r in rows)} tokens, micro-batch {t.micro} x accum {t.accum}"
                + (f", {len(t.events)} OOM event(s)" if t.events else "")
            )
    finally:
        if log:
            log.close()
        if recorder:
            recorder.close()
        if dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
    return rows
