"""Per-GPU memory of an RL run as verl and OpenRLHF run it, by GPU group and phase (planner.config.roles).

Each role is a model on its group's GPUs:
- actor: trained (the plan's knobs: FSDP or ZeRO, precision, checkpointing), its update a supervised step over
  packed rows (remove-padding) or token-budget micro-batches, with the framework's log-prob head
  (planner.estimate.role_heads);
- critic (ppo): trained like the actor, its model with a one-output value head in place of the vocabulary head;
- reference and reward model: no-grad forwards, weights in the compute dtype, sharded as the actor is;
- rollout: the engine's share of each card (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static: weights, KV
  cache and activations inside it; planner.estimate.rollout), asleep between rollouts at the sleep level.
One step's phases in verl's order (trainer/ppo/ray_trainer.py fit): weight sync, rollout, reward scoring, old
log-probs, reference log-probs, critic values, critic update, actor update. In each phase a group holds what its
roles keep resident (less what they offload) and the running role's transient. The plan's peak is the largest
(group, phase); `phases` lists every one as "group: phase".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from planner.config.roles import ACTOR, Group, existing_roles
from planner.config.spec import MemoryBreakdown
from planner.estimate import fsdp, generation, role_heads, rollout, state_terms, trl_ppo, zero
from planner.estimate import memory as mem
from planner.estimate.nograd import compute_dtype_bytes, nograd_forward_bytes
from planner.estimate.overheads import terms as overhead_terms
from planner.estimate.role_heads import logprob_pass_head_bytes, upcasts, value_pass_head_bytes
from planner.estimate.setup import Setup
from planner.frameworks import FRAMEWORKS
from planner.frameworks.rl import RoleEngine
from planner.model.modelspec import ModelSpec, Tensors


@lru_cache(maxsize=32)
def load_role_model(ref: str) -> ModelSpec:
    from planner.model import catalog

    return catalog.load_model(ref)


def value_model(m: ModelSpec) -> ModelSpec:
    """The model with a one-output score head in place of its vocabulary head (verl's critic and reward model are
    AutoModelForTokenClassification with num_labels 1; OpenRLHF's a value_head Linear(hidden, 1)): the input
    embedding stays, the head is hidden x 1, and the logits are one entry per token."""
    body = tuple(t for t in m.tensors if t.role != "head")
    score = Tensors("head", (1, m.text.hidden), name="score")
    return replace(m, name=f"{m.name} (value head)", text=replace(m.text, vocab=1, tied=False), tensors=(*body, score))


@dataclass(frozen=True)
class Roles:
    """Each existing role's model and group."""

    models: dict[str, ModelSpec]
    groups: dict[str, Group]  # role -> its group


def roles_of(s: Setup) -> Roles:
    w = s.knobs.workload
    r = w.roles.resolved(s.knobs.framework)
    names = [n for n in existing_roles(w.kind, r) if n != "ref" or w.has_reference(s.lora)]
    if engine_of(s).value_head_on_policy:  # a hidden x 1 head on the policy, trained with it: no model of its own
        names = [n for n in names if n != "critic"]
    critic = load_role_model(r.critic_model) if r.critic_model not in (None, ACTOR) else s.model
    models = {"actor": s.model, "rollout": s.model, "ref": s.model, "critic": value_model(critic)}
    if r.reward_model:
        models["reward"] = value_model(s.model if r.reward_model == ACTOR else load_role_model(r.reward_model))
    groups = {}
    for g in r.groups():
        for role in g.roles:
            if role in names:
                groups[role] = g if g.gpus else Group(("colocated",), s.world_size)
    return Roles({n: models[n] for n in names}, groups)


def on_group(s: Setup, model: ModelSpec, g: Group) -> Setup:
    """A role's setup on its group's GPUs (whole nodes when the group spans more than one)."""
    per_node = min(g.gpus, s.gpus_per_node)
    return replace(s, model=model, gpus_per_node=per_node, nodes=max(1, g.gpus // per_node))


def frozen_params_bytes(s: Setup) -> int:
    """A no-grad role's weights on one GPU: the compute dtype, sharded like the actor (FSDP or ZeRO-3)."""
    whole = s.model.params * compute_dtype_bytes(s)
    return whole // s.world_size if s.knobs.zero_stage == 3 or s.knobs.fsdp != "off" else whole


def reward_is_engine(s: Setup) -> bool:
    """verl 0.9.1 scores with its reward model in a vLLM/SGLang server (experimental/reward_loop/reward_model.py:51-93),
    not a training worker; OpenRLHF runs it as a DeepSpeed model (RoleEngine.reward_engine)."""
    return engine_of(s).reward_engine


def engine_of(s: Setup) -> RoleEngine:
    """The role machinery the plan's framework declares (planner.frameworks.rl)."""
    return FRAMEWORKS[s.knobs.framework].role_engine


def resident_bytes(s: Setup, role: str, offload: tuple[str, ...]) -> int:
    """What a role keeps on each GPU of its group outside its own phases."""
    if role in ("actor", "critic"):
        params = 0 if f"{role}-params" in offload else state_terms.params_bytes(s)
        return (
            params
            + (0 if f"{role}-optimizer" in offload else state_terms.optimizer_bytes(s))
            + zero.offload_staging_bytes(s)
        )
    if role == "reward" and reward_is_engine(s):
        return 0  # asleep at level 1 between scorings (vllm_async_server.py:859-860), eager: no graphs (reward.yaml)
    if role in ("ref", "reward"):
        return 0 if role in offload else frozen_params_bytes(s)
    return 0


def active_bytes(s: Setup, role: str, offload: tuple[str, ...] = ()) -> int:
    """A role's own states while it runs: a trained role's are loaded back first; an offloaded no-grad role streams
    its sharded weights unit by unit (the gathered units are in its pass)."""
    if role in ("actor", "critic"):
        return state_terms.params_bytes(s) + state_terms.optimizer_bytes(s) + zero.offload_staging_bytes(s)
    return 0 if role in offload and (s.knobs.fsdp != "off" or s.knobs.zero_stage == 3) else frozen_params_bytes(s)


def pass_tokens(s: Setup, budget: int | None, rows: int) -> tuple[int, int]:
    """(rows, width) of one micro-batch of `rows` padded rows: a token budget packs whole rows into one of at most
    `budget` tokens (verl rearrange_micro_batches, utils/seqlen_balancing.py:348-500; no more than the rank holds:
    micro x accumulation x generations rows); remove-padding packs the micro-batch's rows into one; otherwise padded
    rows of the full length. Under Ulysses S the micro-batch is its group's, the budget S x the rank's (verl 0.9.1
    workers/engine/utils.py:104-111), and each rank runs 1/S of it (rank_width)."""
    w = s.knobs.workload
    if budget:
        held = s.micro_batch * s.grad_accum * w.steps_per_gen(s.grad_accum) * s.seq_len
        return 1, max(s.seq_len, min(budget * s.knobs.sequence_parallel, held))
    if w.roles.resolved(s.knobs.framework).remove_padding:
        return 1, rows * s.seq_len
    return rows, s.seq_len


def rank_width(s: Setup, width: int) -> int:
    """A packed micro-batch's tokens on one rank of its Ulysses group: 1/S, padded up to a multiple of S (verl 0.9.1
    utils/ulysses.py:291-298, 121-133: ulysses_pad_and_slice_inputs). The log-probs gathered back whole after the head
    (4 bytes a token, utils/ulysses.py gather_outputs_and_unpad) come after the logits are freed: not the peak."""
    return -(-width // s.knobs.sequence_parallel)


def packed_rows(s: Setup, budget: int | None, rows: int) -> int:
    """Rows of `rows` padded ones whose images one packed micro-batch carries (pass_tokens packs them into one row):
    verl hands the model every row's images beside the packed ids (v0.7.0 workers/actor/dp_actor.py:103-107, :198-204:
    extract_multi_modal_inputs torch.cat's the rows' pixel_values and image_grid_thw, utils/model.py:719-736), so the
    tower runs over all their patches in one call; a token budget's row holds budget // seq_len full-length rows. 0
    where the rows stay padded (each its own images, as micro_batch counts them)."""
    n, width = pass_tokens(s, budget, rows)
    return max(1, width // s.seq_len) if n == 1 else 0


def nograd_pass_bytes(s: Setup, rows: int, width: int, head: int) -> int:
    """A no-grad forward's largest moment: inside a decoder layer, or at the head (the final hidden states and the
    head's tensors); plus the parameters FSDP gathers for the running units."""
    c = compute_dtype_bytes(s)
    at_head = c * rows * width * s.model.text.hidden + head
    return max(nograd_forward_bytes(s, rows, width), at_head) + fsdp.unsharded_params_bytes(s)


def update_bytes(s: Setup, budget: int | None, capacity: int) -> MemoryBreakdown:
    """A trained role's update step (planner.estimate.memory over its packed micro-batch, the tower over every packed
    row's images)."""
    rows, width = pass_tokens(s, budget, s.micro_batch)
    packed = packed_rows(s, budget, s.micro_batch)
    return mem.breakdown(replace(s, micro_batch=rows, seq_len=width, packed_rows=packed), capacity)


def role_phase_bytes(s: Setup, role: str, capacity: int, offload: tuple[str, ...] = ()) -> dict[str, int]:
    """The running role's own bytes in each of its phases (its states loaded and its transient): what the sim traces
    for that role alone (probes/roles_sim.py)."""
    r, c, t = s.knobs.workload.roles.resolved(s.knobs.framework), compute_dtype_bytes(s), s.model.text
    if role == "reward" and reward_is_engine(s):
        return {"reward-scoring": rollout.reward_engine_bytes(r, capacity, s.knobs.framework)}
    if role in ("actor", "ref"):
        micro = logprob_rows(s, role)
        budget = (role == "ref" and r.ref_logprob_max_tokens_per_gpu) or r.logprob_max_tokens_per_gpu
        rows, width = pass_tokens(s, budget, micro)
        width = rank_width(s, width) if rows == 1 else width  # Ulysses needs the packed rows (verl's rules)
        entropy = role == "actor" and engine_of(s).logprob_entropy  # verl's compute_log_prob computes it always
        chunk, copies = role_heads.fused_head(s.knobs.framework, r.fused_kernels)
        if chunk:  # verl's fused head: a chunk's fp32 logits at a time
            head = role_heads.fused_logprob_pass_head_bytes(rows * width, t.vocab, chunk, copies)
        else:
            head = logprob_pass_head_bytes(rows * width, t.vocab, c, entropy, upcasts(s.knobs.framework))
        packed = replace(s, packed_rows=packed_rows(s, budget, micro))
        nograd = active_bytes(s, role, offload) + nograd_pass_bytes(packed, rows, width, head)
        if role == "ref":
            return {"reference-forward": nograd}
        return {
            "old-logps": nograd,
            "actor-update": update_bytes(s, r.max_tokens_per_gpu, capacity).peak_allocated_bytes,
        }
    values_budget, update_budget = critic_budgets(s, r)
    budget = r.logprob_max_tokens_per_gpu if role == "reward" else values_budget
    rows, width = pass_tokens(s, budget, s.micro_batch)
    packed, head = replace(s, packed_rows=packed_rows(s, budget, s.micro_batch)), value_pass_head_bytes(rows * width, c)
    values = active_bytes(s, role, offload) + nograd_pass_bytes(packed, rows, width, head)
    if role == "reward":  # scored with the experience passes' micro-batches
        return {"reward-scoring": values}
    update = update_bytes(s, update_budget, capacity).peak_allocated_bytes
    return {"critic-values": values, "critic-update": update}


def logprob_rows(s: Setup, role: str) -> int:
    """Rows of one micro-batch of the old log-probs (role actor) or the reference's (ref): verl's own keys,
    rollout.log_prob_micro_batch_size_per_gpu and ref.log_prob_micro_batch_size_per_gpu (v0.7.0 workers/
    fsdp_workers.py:1014, :1054 -> workers/actor/dp_actor.py:357,370 data.split(micro_batch_size); v0.5.0 :774, :818;
    v0.6.1 :971, :1011), not the update's ppo_micro_batch_size_per_gpu; the actor's micro-batch where none is given.
    A token budget (use_dynamic_bsz) cuts them instead (pass_tokens)."""
    r = s.knobs.workload.roles
    own = r.logprob_micro_batch if role == "actor" else r.ref_logprob_micro_batch
    return own or s.micro_batch


def critic_budgets(s: Setup, r) -> tuple[int | None, int | None]:
    """(values pass, update) token budgets of the critic: verl's v1 trainer cuts both by the critic's own budget
    (trainer/ppo/v1/trainer_base.py:267-268); OpenRLHF runs its values in the experience passes
    (--rollout.micro_batch_size / max_tokens_per_gpu, trainer/ppo_utils/experience_maker.py) and trains it as the
    actor (--train.micro_batch_size / max_tokens_per_gpu)."""
    if engine_of(s).critic_own_budget:
        return r.critic_max_tokens_per_gpu, r.critic_max_tokens_per_gpu
    return r.logprob_max_tokens_per_gpu, r.max_tokens_per_gpu


# one step's phases in verl's order (trainer/ppo/ray_trainer.py fit) and the role running each
PHASE_ROLE = {
    "weight-sync": "actor",
    "rollout": "rollout",
    "reward-scoring": "reward",
    "old-logps": "actor",
    "reference-forward": "ref",
    "critic-values": "critic",
    "critic-update": "critic",
    "actor-update": "actor",
}


def group_phases(s: Setup, capacity: int) -> dict[str, dict[str, dict[str, int]]]:
    """group name -> phase -> terms (bytes per GPU): each phase a role of the group runs, beside what the group's
    other roles keep resident."""
    R, r = roles_of(s), s.knobs.workload.roles.resolved(s.knobs.framework)
    setups = {role: on_group(s, R.models[role], R.groups[role]) for role in R.models}
    out: dict[str, dict[str, dict[str, int]]] = {}
    for g in {g.name: g for g in R.groups.values()}.values():
        members = [role for role in R.models if R.groups[role].name == g.name]
        label = f"{g.name} ({g.gpus} GPU{'s' if g.gpus > 1 else ''})"
        resident = {f"{m}_resident_bytes": resident_bytes(setups[m], m, r.offload) for m in members if m != "rollout"}
        others = sum(resident.values())
        colocated = "actor" in members and "rollout" in members
        hf = r.rollout_engine == "hf"  # the actor generates itself: no engine, no sync
        if "rollout" in members and not hf:
            resident["rollout_asleep_bytes"] = rollout.asleep_bytes(r, capacity, others, colocated)
        own = {m: role_phase_bytes(setups[m], m, capacity, r.offload) for m in members if m != "rollout"}
        phases = {}
        for phase, role in PHASE_ROLE.items():
            if role not in members or phase == "weight-sync":
                continue
            if role == "rollout" and hf:
                phases[phase] = {**resident, **hf_generation_terms(setups["actor"], r)}
            elif role == "rollout":
                phases[phase] = {
                    **resident,
                    "rollout_asleep_bytes": 0,
                    "rollout_bytes": rollout.awake_bytes(r, capacity, others),
                }
            else:
                phases[phase] = {
                    **resident,
                    f"{role}_resident_bytes": 0,
                    f"{phase_key(phase, role)}_bytes": own[role][phase],
                }
        if engine_of(s).joint_value_update and "critic" in members:  # TRL's PolicyAndValueWrapper (trl_ppo)
            del phases["critic-update"]
            whole = role_phase_bytes(trl_ppo.accumulating(setups["actor"]), "actor", capacity, r.offload)
            phases["actor-update"]["actor_update_bytes"] = whole["actor-update"]
            phases["actor-update"].update(trl_ppo.joint_update_terms(setups["critic"], setups["actor"]))
        if engine_of(s).keeps_scores:  # one copy through every later phase (trl_ppo)
            for terms in (t for p, t in phases.items() if p != "rollout"):
                terms["rollout_scores_bytes"] = trl_ppo.rollout_scores_bytes(setups["actor"])
        if ("actor" in members or "rollout" in members) and not hf:
            phases["weight-sync"] = sync_terms(s, setups, members, resident, capacity, others)
        out[label] = phases
    return out


def hf_generation_terms(a: Setup, r) -> dict[str, int]:
    """Rollout hf: the actor's own HF generate over `generate_batch` sequences (planner.estimate.rl.generation_terms:
    KV cache, the prefill's or last decode step's transient, sampling), beside every role's resident states; under
    ZeRO-3 a framework that unwraps for generation (TRL's unwrap_model_for_generation) gathers the whole policy."""
    rank = generation.sequences_per_generation(a)  # the rank's generation batch, sampled generate_batch at a time
    terms = generation.generation_terms(a, min(r.generate_batch or a.micro_batch, rank))
    if a.knobs.zero_stage == 3 and not engine_of(a).generate_gathers:  # DeepSpeed fetches layer by layer instead
        terms["generation_weights_bytes"] = state_terms.gathered_params_bytes(a)
    if engine_of(a).keeps_scores:
        terms["generation_scores_bytes"] = trl_ppo.rollout_scores_bytes(a, copies=3)
    return terms


def phase_key(phase: str, role: str) -> str:
    """A running role's term in a phase: `actor_update`, `critic_values`, `ref_reference_forward`, ..."""
    return f"{role}_" + phase.removeprefix(f"{role}-").replace("-", "_")


def sync_terms(s, setups, members, resident, capacity, others) -> dict[str, int]:
    """The weight sync on a group: the actor's parameters on the GPU (offloaded ones brought back), the tensors it
    gathers in flight, and the engine's weights awake."""
    r = s.knobs.workload.roles.resolved(s.knobs.framework)
    terms = dict(resident)
    if "actor" in members:
        a = setups["actor"]
        terms["actor_resident_bytes"] = state_terms.params_bytes(a) + (
            0 if "actor-optimizer" in r.offload else state_terms.optimizer_bytes(a)
        )
        terms["sync_gather_bytes"] = sync_gather_bytes(a)
    if "rollout" in members:
        colocated = "actor" in members
        terms["rollout_asleep_bytes"] = 0
        terms["rollout_sync_bytes"] = rollout.sync_bytes(s.model, r, capacity, others, colocated)
    return terms


def sync_gather_bytes(s: Setup) -> int:
    """What the actor's ranks hold for the sync beside their shards: one parameter gathered whole at a time in the
    weights' dtype, and the framework's transfer bucket (planner.estimate.rollout.sync_bucket_bytes)."""
    # verl: fp32 weights (engine/fsdp.yaml:33 model_dtype), not cast before sending; OpenRLHF: each parameter gathered
    # from ZeRO-3 in the weights' dtype and broadcast (or sent by CUDA IPC) alone
    e = engine_of(s)
    per_param = e.sync_bytes_per_param or compute_dtype_bytes(s)
    return s.model.largest_matrix_params() * per_param + rollout.sync_bucket_bytes(s.knobs.framework)


def engine_only(key: str) -> bool:
    """A phase of a group that holds the rollout engine alone."""
    return key.startswith("rollout (")


def breakdown(s: Setup, capacity_bytes: int) -> MemoryBreakdown:
    """The peak (group, phase): its terms, every group's phases in `phases` ("group: phase"), the largest term of the
    peak phase in `peak_term`. The update phases' own split (parameters, gradients, optimizer states, activations)
    is the role's supervised breakdown."""
    groups = group_phases(s, capacity_bytes)
    totals = {f"{g}: {p}": sum(terms.values()) for g, phases in groups.items() for p, terms in phases.items()}
    # an engine alone on its GPUs sizes itself to its share; it fails only where the share is more than is free
    candidates = {k: v for k, v in totals.items() if not engine_only(k) or v > rollout.free_at_start(capacity_bytes)}
    key = max(candidates or totals, key=(candidates or totals).get)
    gname, phase = key.split(": ")
    terms = groups[gname][phase]
    peak = totals[key]
    rollout_share = sum(terms.get(k, 0) for k in ("rollout_bytes", "rollout_asleep_bytes", "rollout_sync_bytes"))
    overheads = overhead_terms(s, peak - rollout_share)
    overhead = sum(t.bytes for t in overheads)
    training = mem.breakdown(s, capacity_bytes)
    states = sum(v for k, v in terms.items() if k.endswith("_resident_bytes"))
    return MemoryBreakdown(
        params_bytes=states,
        grads_bytes=0,
        optimizer_bytes=0,
        activations_bytes=0,
        temp_bytes=peak - states,
        peak_allocated_bytes=peak,
        overhead_bytes=overhead,
        overhead_source=training.overhead_source,
        overheads=overheads,
        device_total_bytes=peak + overhead,
        capacity_bytes=capacity_bytes,
        headroom_bytes=capacity_bytes - peak - overhead,
        peak_phase=phase,
        host_bytes_per_node=training.host_bytes_per_node,
        host_phases=training.host_phases,
        detail={
            **{f"{gname}: {k}": v for k, v in terms.items()},
            "rollout_kv_cache_tokens": kv_tokens(s, groups, capacity_bytes),
        },
        phases=totals,
        peak_term=f"{gname}: " + max(terms, key=terms.get).removesuffix("_bytes"),
    )


def kv_tokens(s: Setup, groups: dict, capacity: int) -> int:
    """Tokens the rollout engine's KV cache holds on each of its GPUs, beside what its group keeps resident when it
    starts (its rollout phase's resident terms; planner.estimate.rollout.kv_cache_tokens)."""
    terms = next(phases["rollout"] for phases in groups.values() if "rollout" in phases)
    if "kv_cache_bytes" in terms:  # HF generate: the cache of its generate batch, no engine pool
        return s.knobs.workload.seq_len() * (s.knobs.workload.roles.generate_batch or s.micro_batch)
    others = sum(v for k, v in terms.items() if k.endswith("_resident_bytes"))
    r = s.knobs.workload.roles.resolved(s.knobs.framework)
    return rollout.kv_cache_tokens(s.model, r, capacity, others, s.knobs.framework)


def other_roles_seconds(s: Setup, hw) -> float:
    """Per optimizer step, what the actor's step time leaves out: the critic's update and values pass, the reward
    model's pass (2 x params FLOPs per token forward, 6 for a trained step), each on its group at the training
    efficiency."""
    from planner.estimate import speed

    R = roles_of(s)
    tokens = s.micro_batch * s.grad_accum * s.seq_len // s.knobs.sequence_parallel  # one rank's tokens of the step
    rate = speed.gpu_tflops(hw, s.knobs.precision) * 1e12 * speed.efficiency(tokens, s.gpu)
    flops = 0.0
    if "critic" in R.models:
        flops += (6 + 2) * R.models["critic"].params * tokens
    if "reward" in R.models:
        flops += 2 * R.models["reward"].params * tokens
    return flops / rate
