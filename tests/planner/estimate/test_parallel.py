"""Tensor, sequence and context parallelism (planner/estimate/parallel.py): one rank's view of the model and the
sequence, the terms only they add, their speed, and the layout rules that refuse what cannot run.

The view's identities are exact and pinned here: a rank under tensor parallel T holds 1/T of every decoder linear
and 1/T of the embedding's and the head's vocabulary (Llama-3.1-70B: 70.55B parameters); under Ulysses or
ring attention a rank's saved activations outside attention are those of its slice of the sequence (Jacobs et al.
2023, section 3.1), and ZeRO-3 shards over every rank that is not tensor parallel."""

import pytest

from planner.config.layout import Layout
from planner.config.spec import Goal, Knobs, Plan
from planner.errors import BadInput
from planner.estimate import activation_terms, overheads, parallel, speed, state_terms, temp_terms
from planner.estimate.setup import Setup
from planner.model import catalog, hardware
from planner.search.estimates import make_plan


def _setup(model="llama-3.2-3b", seq=65536, gpus=8, micro=1, **knobs):
    return Setup(catalog.load_model(model), Knobs(**knobs), micro, 1, seq, gpus, 1)


def test_a_tensor_parallel_rank_holds_a_share_of_every_decoder_linear():
    m = catalog.load_model("llama-3.1-70b")
    whole = {r: n for r, n in m.params_by_role().items()}
    assert m.params == pytest.approx(70.55e9, rel=1e-3)  # the model card's 70.55B
    shard = parallel.tp_model(m, 8)
    linears = sum(t.numel for t in m.tensors if t.role == "layer" and len(t.shape) == 2)
    norms = whole["layer"] - linears
    vocab = (whole["embed"] + whole["head"]) // 8  # vocabulary-parallel (transformers' embedding_rowwise, colwise head)
    assert shard.params == vocab + whole["norm"] + norms + linears // 8
    assert (shard.text.heads, shard.text.kv_heads, shard.text.intermediate) == (8, 1, 3584)
    q = next(t for t in shard.tensors if t.name == "q_proj")
    o = next(t for t in shard.tensors if t.name == "o_proj")
    assert q.shape == (1024, 8192) and o.shape == (8192, 1024)  # colwise splits outputs, rowwise inputs


def test_gpt2_conv1d_weights_split_their_stored_dimensions():
    m = catalog.load_model("debug-gpt2")
    shard = parallel.tp_model(m, 2)
    for whole, part in zip(m.tensors, shard.tensors):
        if whole.role == "layer" and len(whole.shape) == 2:
            assert part.numel * 2 == whole.numel
            rowwise = whole.name.endswith("c_proj")
            assert part.shape[0 if rowwise else 1] * 2 == whole.shape[0 if rowwise else 1]  # Conv1D stores (in, out)


@pytest.mark.parametrize("checkpointing,live_layers", [("off", 28), ("full", 0), ("selective-op", 0), ("every-2", 14)])
def test_a_ulysses_rank_saves_what_its_slice_of_the_sequence_saves(checkpointing, live_layers):
    """Outside attention a rank holds its slice; inside, the whole sequence for 1/S of the heads: the same bytes, but
    for the attention output, saved by the kernel and again, exchanged back to the slice, by the output projection
    (24 heads x 128 in bf16 per local token, in each layer not under a checkpoint; measured on gloo:
    benchmarks/parallel_sharding.py)."""
    sp = _setup(sequence_parallel=4, checkpointing=checkpointing, attention="flash")
    alone = _setup(seq=65536 // 4, gpus=8, checkpointing=checkpointing, attention="flash")
    v = parallel.view(sp)
    assert (v.seq_len, v.context, v.world_size) == (16384, 65536, 8)
    output_copy = 2 * 16384 * 24 * 128
    assert (
        activation_terms.activations_bytes(v) == activation_terms.activations_bytes(alone) + live_layers * output_copy
    )
    assert temp_terms.logits_loss_bytes(v) == temp_terms.logits_loss_bytes(alone)  # the loss on the local slice


def test_sdpa_under_a_sequence_split_runs_without_a_padding_mask():
    sdpa, flash = _setup(sequence_parallel=2), _setup(sequence_parallel=2, attention="flash")
    assert activation_terms.activations_bytes(parallel.view(sdpa)) == activation_terms.activations_bytes(
        parallel.view(flash)
    )
    assert parallel.view(_setup()) == _setup()  # no parallel knob: the setup itself


def test_the_all_to_all_and_ring_buffers_count_the_local_q_k_v():
    t = catalog.load_model("llama-3.2-3b").text  # 24 heads, 8 KV heads, head_dim 128
    v = parallel.view(_setup(sequence_parallel=4, attention="flash"))
    assert parallel.ulysses_all_to_all_bytes(v, 2) == 2 * 16384 * 128 * (24 + 2 * 8)
    v16 = parallel.view(_setup(sequence_parallel=16, attention="flash"))  # 8 KV heads repeated to 16
    assert parallel.ulysses_all_to_all_bytes(v16, 2) == 2 * 4096 * 128 * (24 + 2 * 16)
    ring = parallel.view(_setup(context_parallel=4, attention="flash", fsdp="full", framework="hf"))
    block = 2 * 16384 * 2 * t.kv_heads * t.head_dim
    assert parallel.ring_kv_blocks_bytes(ring, 2, backward=False) == block
    assert parallel.ring_kv_blocks_bytes(ring, 2, backward=True) == 2 * block
    gather = parallel.view(_setup(context_parallel=4, cp_attention="all-gather", fsdp="full", framework="hf"))
    assert parallel.ring_kv_blocks_bytes(gather, 2, backward=False) == 3 * block  # the other three ranks' blocks
    assert parallel.ring_kv_blocks_bytes(v, 2, backward=True) == 0


def test_states_shard_over_every_rank_but_the_tensor_parallel_ones():
    """DeepSpeed's Ulysses (its sequence-data-parallel group) and accelerate's dp_shard_cp mesh shard states over data
    x sequence parallel; under tensor parallel T, FSDP2 shards a rank's share over the world / T."""
    sp = parallel.view(_setup(sequence_parallel=4, zero_stage=3))
    plain = _setup(zero_stage=3)
    assert state_terms.params_bytes(sp) == state_terms.params_bytes(plain)
    assert state_terms.optimizer_bytes(sp) == state_terms.optimizer_bytes(plain)
    tp = parallel.view(_setup(tensor_parallel=2, fsdp="full"))
    assert tp.world_size == 4
    assert state_terms.optimizer_bytes(tp) == pytest.approx(tp.model.params * 8 / 4, rel=1e-3)  # Adam's moments
    assert state_terms.params_bytes(tp) == pytest.approx(tp.model.params * 4 / 4, rel=1e-3)  # the fp32 shard


def test_each_parallel_split_costs_communication_and_shows_in_the_ranking():
    hw = hardware.resolve("h100", 8, 1)
    base = speed.step_time(_setup(seq=32768, checkpointing="full", attention="flash"), hw)
    for knobs in (
        {"sequence_parallel": 4},
        {"tensor_parallel": 4, "fsdp": "full"},
        {"context_parallel": 4, "fsdp": "full", "framework": "hf"},
    ):
        s = _setup(seq=32768, checkpointing="full", attention="flash", **knobs)
        assert speed.parallel_seconds(parallel.view(s), hw, 1.0) > 0
    s = _setup(seq=32768, checkpointing="full", attention="flash", sequence_parallel=4)
    assert speed.step_time(s, hw).comm_s > base.comm_s


def test_a_plan_splits_the_global_batch_over_the_data_parallel_ranks():
    m, hw = catalog.load_model("llama-3.2-3b"), hardware.resolve("h100", 8, 1)
    p = make_plan(m, hw, Goal(global_batch=8, seq_len=65536), Knobs(lora_rank=16, sequence_parallel=4), 1)
    assert (p.data_parallel, p.grad_accum, p.world_size) == (2, 4, 8)
    assert p.micro_batch * p.grad_accum * p.data_parallel == p.global_batch
    with pytest.raises(ValueError, match="data-parallel size"):
        Plan(**{**p.model_dump(), "grad_accum": 1})


@pytest.mark.parametrize(
    "layout,knobs,needle",
    [
        (Layout(8), {"fsdp": "full", "tensor_parallel": 16}, "must divide the world size 8"),
        (Layout(4, 2), {"fsdp": "full", "tensor_parallel": 8}, "must divide --gpus-per-node 4"),
        (Layout(16, heads=24, kv_heads=8, vision=False), {"sequence_parallel": 16}, "24 attention heads"),
        (
            Layout(8, heads=32, kv_heads=8, vision=False),
            {"fsdp": "full", "tensor_parallel": 4, "sequence_parallel": 2},
            None,
        ),
        (Layout(8, heads=64, kv_heads=4, vision=False), {"fsdp": "full", "tensor_parallel": 8}, "4 KV heads"),
        (Layout(8, heads=64, kv_heads=8, seq_len=4097, vision=False), {"sequence_parallel": 2}, "pad to 4098"),
        (Layout(8, seq_len=4098), {"context_parallel": 2, "framework": "hf", "fsdp": "full"}, "pad to 4100"),
        (Layout(8, experts=8), {"fsdp": "full", "tensor_parallel": 2}, "experts are not split"),
        (Layout(8, heads=8, kv_heads=8), {"sequence_parallel": 2}, "with images"),
    ],
)
def test_the_layout_refuses_what_the_split_cannot_run(layout, knobs, needle):
    error = layout.knob_error(Knobs(**knobs))
    assert (error is None) if needle is None else (needle in str(error))


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"cp_attention": "all-gather", "framework": "hf"}, "needs --context-parallel 2"),
        ({"sequence_parallel": 2, "attention": "eager"}, "use --attention sdpa or flash"),
        (
            {"tensor_parallel": 2, "lora_rank": 8, "quant": "nf4", "zero_stage": 2, "framework": "hf"},
            "--tensor-parallel 1",
        ),
        ({"tensor_parallel": 2}, "give --fsdp full or grad-op"),
        ({"context_parallel": 2}, "cannot run --context-parallel on"),
        ({"context_parallel": 2, "framework": "hf"}, "needs FSDP2"),
        ({"sequence_parallel": 2, "framework": "hf"}, "runs on DeepSpeed only"),
        ({"sequence_parallel": 2, "context_parallel": 2, "framework": "hf", "zero_stage": 3}, "needs FSDP2"),
        ({"sequence_parallel": 2, "context_parallel": 2, "framework": "hf", "fsdp": "full"}, "DeepSpeed only"),
        ({"tensor_parallel": 2, "framework": "swift", "zero_stage": 2, "lora_rank": 8}, "full fine-tuning only"),
        ({"tensor_parallel": 2, "framework": "deepspeed", "zero_stage": 3}, "give --zero 1 or 2"),
        ({"context_parallel": 2, "framework": "axolotl"}, "needs --attention flash"),
        ({"sequence_parallel": 2, "framework": "llamafactory"}, "cannot run --sequence-parallel on"),
        ({"tensor_parallel": 2, "workload": {"kind": "grpo"}, "fsdp": "full"}, "not planned yet"),
        ({"sequence_parallel": 2, "workload": {"kind": "grpo"}}, "cannot run --sequence-parallel with --workload grpo"),
        (
            {"sequence_parallel": 2, "workload": {"kind": "grpo"}, "framework": "trl", "zero_stage": 3},
            "GRPOConfig refuses parallelism_config's cp_size or sp_size above 1",
        ),
        (  # PPO's critic splits on its own (critic.ulysses_sequence_parallel_size): not planned
            {
                "sequence_parallel": 2,
                "workload": {"kind": "ppo"},
                "framework": "verl",
                "fsdp": "full",
                "attention": "flash",
            },
            "not planned yet",
        ),
        (
            {"sequence_parallel": 2, "workload": {"kind": "grpo"}, "framework": "openrlhf", "zero_stage": 3},
            "cannot run --sequence-parallel",
        ),
        (  # verl's Ulysses slices packed rows (engine/fsdp/transformer_impl.py:148-152)
            {
                "sequence_parallel": 2,
                "workload": {"kind": "grpo", "roles": {"remove_padding": False}},
                "framework": "verl",
                "fsdp": "full",
                "attention": "flash",
            },
            "need model.use_remove_padding true",
        ),
    ],
)
def test_the_knob_rules_refuse_in_one_line(fields, needle):
    with pytest.raises(BadInput, match=needle):
        Knobs.make(**fields)


def test_a_probe_refuses_a_split_it_cannot_trace():
    with pytest.raises(BadInput, match="such plans are analytic"):
        Knobs(sequence_parallel=2).for_probe("sim")


def test_host_ram_per_node_counts_every_process_of_the_node():
    """Offloaded states: a node's eight processes hold the whole model's share of the node, split or not."""
    tp = parallel.view(
        _setup(model="llama-3.1-8b", seq=4096, tensor_parallel=4, fsdp="full", offload="optimizer+params")
    )
    plain = _setup(model="llama-3.1-8b", seq=4096, fsdp="full", offload="optimizer+params")
    assert (tp.node_ranks, tp.gpus_per_node) == (8, 2)
    assert state_terms.host_offload_bytes_per_node(tp) == pytest.approx(
        state_terms.host_offload_bytes_per_node(plain), rel=0.01
    )
    assert (
        overheads.overhead_bytes(parallel.view(_setup(tensor_parallel=8, fsdp="full")), 0)
        > overheads.CUDA_CONTEXT_BYTES
    )


def _best(seq: int, sp: list[int]):
    from planner import advise

    body = {
        "model": "llama-3.2-3b",
        "gpu": "h100",
        "gpus_per_node": 8,
        "global_batch": 64,
        "seq_len": seq,
        "lora_rank": 16,
        "sequence_parallel": sp,
        "checkpointing": ["off", "full", "selective-op"],
        "top": 1,
    }
    return advise.suggest(advise.parse(advise.SuggestRequest, body)).plans[0]


def test_ulysses_beats_more_checkpointing_only_where_the_sequence_needs_it():
    """Llama-3.2-3B LoRA on 8 x H100: at 64k tokens one GPU a sample fits only with full checkpointing, and Ulysses 2
    with selective checkpointing is faster (its all-to-all costs less than full recomputation); at 4k tokens nothing
    needs the split, and the best plan has none (the all-to-all is only a cost)."""
    alone, split = _best(65536, [1]), _best(65536, [1, 2, 4, 8])
    assert alone.checkpointing == "full" and split.sequence_parallel > 1 and split.checkpointing != "full"
    assert split.tokens_per_s > 1.2 * alone.tokens_per_s
    short = _best(4096, [1, 2, 4, 8])
    assert short.sequence_parallel == 1 and short.tokens_per_s > _best(4096, [2]).tokens_per_s
