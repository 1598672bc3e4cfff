"""The trainers that zero every dropout (TRL's disable_dropout_in_model: DPO, KTO, GKD, PPO) save what a LoRA model
without dropout saves: measured with PEFT's own LoRA model and TRL's own function, on CPU, by the tensors autograd
saves in a forward (planner.estimate.lora.dropout_runs plans it so; its analytic test is
tests/planner/estimate/test_dropout_zeroed.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")
trl_utils = pytest.importorskip("trl.trainer.utils")
transformers = pytest.importorskip("transformers")


def lora_model(dropout: float):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=256,
        attn_implementation="sdpa",
    )
    model = transformers.LlamaForCausalLM(cfg)
    lora = peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=dropout, target_modules="all-linear")
    return peft.get_peft_model(model, lora).train()


def saved_bytes(model) -> int:
    """Bytes of the distinct storages autograd saves in one forward of 2 x 32 tokens."""
    seen: dict[int, int] = {}

    def pack(t):
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
        return t

    ids = torch.randint(0, 256, (2, 32))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, labels=ids).loss.backward()
    return sum(seen.values())


def test_trls_disable_dropout_saves_what_no_dropout_saves():
    dropped, plain = lora_model(0.05), lora_model(0.0)
    with_dropout = saved_bytes(dropped)
    trl_utils.disable_dropout_in_model(dropped)  # what TRL's DPO, KTO, GKD and PPO trainers call before training
    assert all(m.p == 0 for m in dropped.modules() if isinstance(m, torch.nn.Dropout))
    assert saved_bytes(dropped) == saved_bytes(plain) < with_dropout


def test_the_sim_zeroes_dropout_where_the_trainer_does():
    """probes.step.build_model zeroes every dropout for a DPO plan under TRL (as the trainer does), not for SFT."""
    from planner.config.spec import Knobs
    from planner.config.workload import Workload
    from planner.model.catalog import model_config
    from probes.step import Case, build_model

    def dropouts(kind: str) -> set[float]:
        knobs = Knobs(framework="trl", workload=Workload(kind=kind), lora_rank=8, lora_dropout=0.05)
        model = build_model(Case(model_config("debug-llama"), knobs, 1, 1, 16), layers=1)
        return {m.p for n, m in model.named_modules() if ".lora_dropout." in n and isinstance(m, torch.nn.Dropout)}

    assert dropouts("dpo") == {0} and dropouts("sft") == {0.05}


def test_gpt2s_own_dropout_under_kto_is_planned_as_the_sim_runs_it():
    """A 4-layer GPT-2 under TRL's KTO (every nn.Dropout zeroed, its resid_pdrop 0.1 too): the plan's peak equals the
    sim's within 0.01% (-0.002% when pinned, 2026-12-07; before, the plan kept the masks the trainer zeroes)."""
    from planner.config.spec import Knobs
    from planner.config.workload import Workload
    from planner.estimate.memory import breakdown
    from planner.estimate.setup import Setup
    from planner.model.catalog import model_config
    from planner.model.families import from_config
    from probes.sim import simulate
    from probes.step import Case

    cfg = {**model_config("gpt2"), "n_layer": 4}
    k = Knobs(framework="trl", precision="bf16", checkpointing="off", workload=Workload(kind="kto"))
    sim = simulate(Case(cfg, k, 1, 1, 512))
    a = breakdown(Setup(from_config(cfg, "gpt2"), k, 1, 1, 512), 80 * 2**30)
    assert a.peak_allocated_bytes == pytest.approx(sim.peak_allocated_bytes, rel=1e-4)
