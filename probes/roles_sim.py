"""The sim probe for the roles of a verl / OpenRLHF run: each role's phases traced on fake tensors with the real
model at its real depth, counted by the live-bytes tracker (planner.estimate.roles is the analytic side).

- actor-update: the policy over one packed micro-batch (remove-padding: one row of every token, no attention mask),
  its logits (temperature 1.0: not copied), the log-probs of the next tokens (verl's
  logprobs_from_logits: flash-attn's Triton cross-entropy on CUDA, which writes the logits' gradient into the logits
  when no entropy needs them; emulated here with its allocations), the entropy when computed, PPO's clipped loss
  (with the low-variance KL term when a reference exists); backward; AdamW; two optimizer steps, the second read;
- old-logps / reference-forward: the no-grad pass of the policy (with the entropy, as verl's compute_log_prob) or of
  the reference;
- critic-values / critic-update: the critic (AutoModelForTokenClassification, one label) no-grad, and its clipped
  value loss step; reward-scoring: the reward model's no-grad pass.
The rollout engine and the weight sync run CUDA-only code (vLLM/SGLang, NCCL or CUDA IPC): analytic
(planner.estimate.rollout), not traced.
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from planner.estimate.role_heads import upcasts
from planner.frameworks import FRAMEWORKS
from probes.sim import fake_model
from probes.step import Case, autocast_for, build_model
from probes.tracker import LiveBytes
from recipe import make_optimizer

PHASES = ("actor-update", "old-logps", "reference-forward", "critic-values", "critic-update", "reward-scoring")


def role_knobs(precision: str, framework: str, update: int, passes: int, entropy: str = "off", critic: int = 0):
    """The knobs a role runs with on one rank without sharding (what the sim traces): a PPO run with token budgets
    (update, no-grad passes, the critic's), full checkpointing, flash attention. Built unchecked: Knobs' framework
    rules ask verl for FSDP and OpenRLHF for ZeRO, whose sharding is pinned elsewhere (benchmarks/fsdp_sharding.py,
    zero_sharding.py)."""
    from planner.config.spec import Knobs
    from planner.config.workload import Workload

    budgets = {"max_tokens_per_gpu": update, "logprob_max_tokens_per_gpu": passes}
    w = Workload(
        kind="ppo", beta=0.001, roles={**budgets, "critic_max_tokens_per_gpu": critic or update, "entropy": entropy}
    )
    fields = {"precision": precision, "checkpointing": "full", "attention": "flash", "framework": framework}
    return Knobs.model_construct(**{**dict(Knobs()), **fields, "workload": w})


class _FlashCrossEntropy(torch.autograd.Function):
    """flash_attn.ops.triton.cross_entropy.CrossEntropyLoss as verl calls it (inplace_backward): forward returns
    the per-token loss and saves the logits and the fp32 log-sum-exp; backward writes the gradient into the logits'
    own storage (inplace) or a new logits-sized tensor."""

    @staticmethod
    def forward(ctx, logits, labels, inplace: bool):
        n = logits.size(0)
        losses = logits.new_empty(n, dtype=torch.float32)
        lse = logits.new_empty(n, dtype=torch.float32)
        ctx.save_for_backward(logits, lse, labels)
        ctx.inplace = inplace
        return losses

    @staticmethod
    def backward(ctx, grad):
        logits, _, _ = ctx.saved_tensors
        out = logits if ctx.inplace else torch.empty_like(logits)
        return out, None, None


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """verl's utils/torch_functional.py entropy_from_logits."""
    pd = torch.nn.functional.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - torch.sum(pd * logits, dim=-1)


def _policy_logps(model, ids, k, entropy: str, grad: bool):
    """verl's FSDPEngineWithLMHead forward, remove-padding path (the packed row); under --framework openrlhf its
    Actor.forward: the logits cast to fp32 and the cross-entropy never in place (models/actor.py:267,
    models/utils.py:172-196)."""
    upcast = upcasts(k.framework)  # the adapter's RoleEngine.upcasts_logprobs (OpenRLHF)
    with autocast_for(k, "cuda") or nullcontext():
        logits = model(input_ids=ids, use_cache=False).logits.squeeze(0)  # temperature 1.0: no copy (verl :92-103)
    if upcast:
        logits = logits.to(torch.float32)
    want = entropy != "off"
    logp = -_FlashCrossEntropy.apply(logits, ids.squeeze(0), not (want and grad) and not upcast)
    ent = None
    if want:
        if entropy == "checkpointed" and grad:
            ent = torch.utils.checkpoint.checkpoint(entropy_from_logits, logits, use_reentrant=False)
        else:
            ent = entropy_from_logits(logits)
    return logp, ent


def _actor_loss(logp, ent, beta: float, coeff: float):
    """verl's compute_policy_loss (vanilla PPO clip) and the low-variance KL of use_kl_loss; token-mean."""
    old, adv, ref = logp.detach(), torch.ones_like(logp), torch.zeros_like(logp)
    ratio = torch.exp(logp - old)
    pg = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 0.8, 1.2))
    loss = pg.mean()
    if ent is not None and coeff:
        loss = loss - coeff * ent.mean()
    if beta > 0:
        kl = ref - logp
        loss = loss + beta * torch.clamp(torch.exp(kl) - kl - 1, -10, 10).mean()
    return loss


def _critic_loss(values, clip: float = 0.5):
    returns, old = torch.zeros_like(values), values.detach()
    clipped = old + (values - old).clamp(-clip, clip)
    return 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2).mean()


def _values(model, ids, k):
    with autocast_for(k, "cuda") or nullcontext():  # no autocast under fp32 / bf16-pure: the same on CPU
        return model(input_ids=ids, use_cache=False).logits.squeeze(-1)


def simulate_roles(
    case: Case,
    tokens: dict[str, tuple[int, int]],
    entropy: str = "off",
    beta: float = 0.0,
    steps: int = 2,
    real: bool = False,
    paths: str = "cuda",
) -> dict[str, int]:
    """Each phase's peak for the roles in `tokens` (role -> (update tokens, no-grad pass tokens) of its packed
    micro-batches), traced on fake tensors. Each role is traced alone (its own parameters and optimizer states, no
    other role's): the role's own bytes in that phase. `entropy`: the update's entropy term (off, on,
    checkpointed); `paths`: CUDA's kernels (the plan's) or "cpu" (what real CPU steps run). `real`: the same steps on real CPU tensors with CPU code paths (the critic and reward model, whose
    steps have no CUDA-only kernel: the measurement the sim is held to)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    layers = case.config.get("num_hidden_layers") or case.config["text_config"]["num_hidden_layers"]
    mode = nullcontext() if real else FakeTensorMode(allow_non_fake_inputs=True)
    out: dict[str, int] = {}
    for role, (update_tokens, pass_tokens) in tokens.items():
        value = role in ("critic", "reward")
        if real and not value:
            raise ValueError(f"{role}: its log-prob head runs flash-attn's CUDA kernel; only the sim traces it")
        model = (
            build_model(case, layers, "cpu", value_head=value)
            if real
            else fake_model(case, layers, mode, paths, value_head=value)
        )
        if role in ("ref", "reward"):
            model.eval().requires_grad_(False)
        tracker = LiveBytes()
        with mode:
            tracker.add_existing(list(model.parameters()), "params")
            with tracker:
                if role in ("actor", "critic"):  # the update first: its optimizer states are resident in the pass
                    opt = _update(role, model, case, tracker, update_tokens, entropy, beta, steps)  # noqa: F841
                    out[f"{role}-update"] = tracker.segments[f"{role}-update"][0]
                out.update(_nograd_pass(role, model, case, tracker, pass_tokens))
    return out


NOGRAD_PHASE = {"actor": "old-logps", "ref": "reference-forward", "critic": "critic-values", "reward": "reward-scoring"}


def _nograd_pass(role, model, case, tracker, tokens: int) -> dict[str, int]:
    ids = torch.zeros(1, tokens, dtype=torch.long)
    tracker.set_segment(NOGRAD_PHASE[role])
    with torch.no_grad():
        if role in ("critic", "reward"):
            _values(model, ids, case.knobs)
        else:
            always = FRAMEWORKS[case.knobs.framework].role_engine.logprob_entropy  # verl's compute_log_prob
            entropy = "on" if role == "actor" and always else "off"
            _policy_logps(model, ids, case.knobs, entropy, grad=False)
    tracker.set_segment("between")
    return {NOGRAD_PHASE[role]: tracker.segments[NOGRAD_PHASE[role]][0]}


def _update(role, model, case, tracker, update_tokens, entropy, beta, steps):
    k = case.knobs
    opt = make_optimizer([p for p in model.parameters() if p.requires_grad], k.optimizer)
    ids = torch.zeros(1, update_tokens, dtype=torch.long)
    for step in range(steps):
        if step == steps - 1:
            tracker.reset_peaks()
        for _ in range(min(case.grad_accum, 2)):
            tracker.set_segment(f"{role}-update")
            if role == "actor":
                logp, ent = _policy_logps(model, ids, k, entropy, grad=True)
                loss = _actor_loss(logp, ent, beta, 0.01)
                del logp, ent
            else:
                loss = _critic_loss(_values(model, ids, k))
            loss.backward()
            del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
        tracker.set_segment("between")
    return opt
