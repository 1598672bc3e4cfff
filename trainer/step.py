"""The bundled trainer's Trainer: one process of a run of one plan (micro-batch x accumulation x world == global
batch) on torch or DeepSpeed, on CPU (gloo) or CUDA (nccl): its optimizer steps, with a runtime OOM guard
(trainer.oom), and its evaluation.

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
import os
import time

import torch
import torch.distributed as dist

from recipe import allocate_ranks
from trainer.data import collate, micro_batches, target_tokens, token_micro_batches
from trainer.model import token_loss_sum
from trainer.oom import OOMInjector, record_oom, shrink
from trainer.runconfig import RunConfig
from trainer.setup import refuse_parallel, setup


class Trainer:
    """One process's share of the run: its rank, device and parallel mesh (recipe.parallel.Mesh), what trainer.setup
    built on it, and its steps."""

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
        refuse_parallel(self, cfg)
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
        setup(self)

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
                    record_oom(self, str(e))
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
            from recipe.attention import pack

            return pack([s[: self.cfg.seq_len] for s in samples])
        return collate(samples, self.cfg.seq_len)

    def _groups(self, indices: list[int]) -> list[list[int]]:
        """This step's micro-batches: `accum` of `micro` samples, or cut by the token budget and padded with empty
        ones to the most any rank has (every rank runs as many micro-steps)."""
        if not self.budget:
            return micro_batches(indices, self.micro, self.accum)
        groups = token_micro_batches(indices, self.lengths, self.budget)
        return groups + [[]] * (int(self._max(float(len(groups)))) - len(groups))

    def train_step(self) -> dict:
        indices = self.sampler.next()
        longest = int(self._max(float(max((min(len(self.samples[i]), self.cfg.seq_len) for i in indices), default=0))))
        attempt = self._attempt(indices)
        while attempt is None:
            shrink(self)
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
