"""LLaMA-Factory's reward model (stage rm) from the final hidden states on, on real CPU tensors traced by
probes.tracker: trl's AutoModelForCausalLMWithValueHead keeps the causal LM's vocabulary head, so its forward makes
the [rows, seq, vocab] logits in the compute dtype and then their fp32 copy (trl 0.24.0 models/modeling_value_head.py:
169-181, `lm_logits.float()`), beside trl's ValueHead over the last hidden state (:50-59: dropout 0.1, the output cast
to the head's fp32 dtype, a Linear to one value); LLaMA-Factory's PairwiseTrainer.compute_loss discards the logits and
takes -logsigmoid(chosen - rejected) of the last valid token's values (0.9.5 src/llamafactory/train/rm/trainer.py:
98-109). Run with LLaMA-Factory's own venv it imports trl's ValueHead and LLaMA-Factory's compute_loss; the forward's
three lines around them are trl's (:169-181). `python probes/lf_valuehead.py ROWS WIDTH VOCAB HIDDEN` prints the peak
live bytes of the forward (to compute_loss's return) and of backward, over the hidden states' own bytes, as JSON;
with CONFIG_JSON EXAMPLES WIDTH after them, also a whole full fine-tuning step's peak (full_step_peak)."""

from __future__ import annotations

import json
import sys

import torch

from probes.tracker import LiveBytes, second_step_peak


def _pairwise_loss(model, inputs):
    """0.9.5 train/rm/trainer.py:98-109 (return_outputs False), where LLaMA-Factory's venv does not run this."""
    _, _, values = model(**inputs, output_hidden_states=True, return_dict=True, use_cache=False)
    batch_size = inputs["input_ids"].size(0) // 2
    chosen_masks, rejected_masks = torch.split(inputs["attention_mask"], batch_size, dim=0)
    chosen_rewards, rejected_rewards = torch.split(values, batch_size, dim=0)
    chosen_scores = chosen_rewards.gather(dim=-1, index=(chosen_masks.sum(dim=-1, keepdim=True) - 1))
    rejected_scores = rejected_rewards.gather(dim=-1, index=(rejected_masks.sum(dim=-1, keepdim=True) - 1))
    chosen_scores, rejected_scores = chosen_scores.squeeze(), rejected_scores.squeeze()
    return -torch.nn.functional.logsigmoid(chosen_scores.float() - rejected_scores.float()).mean()


try:  # LLaMA-Factory's and trl's own, where LLaMA-Factory's venv runs this
    import importlib.machinery
    import importlib.util
    import types

    if importlib.util.find_spec("llamafactory") and not importlib.util.find_spec("torchaudio"):
        # 0.9.5's data/mm_plugin.py imports torchaudio at its top for audio inputs; the venv has none and the pairwise
        # loss never reaches it: an empty stand-in lets the trainer's module import
        stand_in = types.ModuleType("torchaudio")
        stand_in.__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
        sys.modules["torchaudio"] = stand_in
    from llamafactory.train.rm.trainer import PairwiseTrainer
    from trl.models.modeling_value_head import ValueHead

    def compute_loss(model, inputs):
        return PairwiseTrainer.compute_loss(None, model, inputs)

    SOURCE = "llamafactory"
except ImportError:
    ValueHead, compute_loss, SOURCE = None, _pairwise_loss, "copy"


class _Head(torch.nn.Module):
    """The value-head model from the last hidden state on: the causal LM's lm_head and trl's ValueHead, and trl's
    forward's return (modeling_value_head.py:169-181) with the hidden states standing for the base model's output."""

    def __init__(self, hidden: torch.Tensor, vocab: int, compute: torch.dtype):
        super().__init__()
        self.hidden = hidden
        self.lm_head = torch.nn.Linear(hidden.size(-1), vocab, bias=False, dtype=compute)
        config = type("Config", (), {"hidden_size": hidden.size(-1), "summary_dropout_prob": 0.1})()
        self.v_head = ValueHead(config) if ValueHead else _value_head(hidden.size(-1))

    def forward(self, **_kwargs):
        lm_logits = self.lm_head(self.hidden)  # the base model's output logits
        value = self.v_head(self.hidden).squeeze(-1)  # :174-177
        if lm_logits.dtype != torch.float32:  # :179-181
            lm_logits = lm_logits.float()
        return (lm_logits, None, value)


def _value_head(hidden: int) -> torch.nn.Module:
    """trl's ValueHead (:22-59) where trl is not installed: dropout 0.1, the cast to fp32, Linear(hidden, 1)."""

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dropout, self.summary = torch.nn.Dropout(0.1), torch.nn.Linear(hidden, 1)

        def forward(self, h):
            out = self.dropout(h)
            return self.summary(out.to(self.summary.weight.dtype) if out.dtype != self.summary.weight.dtype else out)

    return Head()


def peaks(rows: int, width: int, vocab: int, hidden_size: int, amp: bool = False) -> dict:
    """Peak live bytes over the hidden states' own (rows x width x hidden in bf16), of the forward to compute_loss's
    return and of backward; rows are chosen then rejected (the pairwise collator's order). `amp`: under CUDA's
    autocast policy (probes.amp, as the Trainer's bf16 runs it), where the fp32 ValueHead's Linear runs in bf16."""
    from contextlib import nullcontext

    from probes.amp import CudaAutocast

    compute = torch.bfloat16
    torch.manual_seed(0)
    hidden = torch.randn(rows, width, hidden_size, dtype=compute, requires_grad=True)
    model = _Head(hidden, vocab, compute).train()
    mask = torch.ones(rows, width, dtype=torch.long)
    inputs = {"input_ids": torch.zeros(rows, width, dtype=torch.long), "attention_mask": mask}
    with LiveBytes() as t:
        base = t.live
        with CudaAutocast(compute) if amp else nullcontext():
            loss = compute_loss(model, inputs)
        forward = t.peak - base
        t.peak = t.live
        loss.backward()
        backward = t.peak - base
    return {"source": SOURCE, "forward": forward, "backward": backward}


class _ValueHeadModel(torch.nn.Module):
    """trl's AutoModelForCausalLMWithValueHead around a causal LM: its forward (modeling_value_head.py:150-181) takes
    the last hidden state and the logits from the base model's output, the ValueHead over the former."""

    def __init__(self, base: torch.nn.Module):
        super().__init__()
        self.pretrained_model = base
        config = type("Config", (), {"hidden_size": base.config.hidden_size, "summary_dropout_prob": 0.1})()
        self.v_head = ValueHead(config) if ValueHead else _value_head(base.config.hidden_size)

    def forward(self, input_ids, attention_mask, **_kwargs):
        out = self.pretrained_model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True)
        lm_logits, value = out.logits, self.v_head(out.hidden_states[-1]).squeeze(-1)
        if lm_logits.dtype != torch.float32:
            lm_logits = lm_logits.float()
        return (lm_logits, None, value)


def full_step_peak(config: dict, examples: int, width: int) -> int:
    """Peak live bytes of the second of two full fine-tuning steps of the value-head model over a causal LM built from
    `config` (a transformers config dict with model_type), fp32, `examples` chosen + rejected pairs of `width` tokens,
    LLaMA-Factory's pairwise loss, AdamW foreach (recipe.make_optimizer): the weights and buffers counted from the
    start."""
    import transformers

    from recipe import make_optimizer

    torch.manual_seed(0)
    fields = {k: v for k, v in config.items() if k != "model_type"}
    cfg = transformers.AutoConfig.for_model(config["model_type"], **fields, pad_token_id=0)
    model = _ValueHeadModel(transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")).train()
    ids = torch.randint(1, cfg.vocab_size, (2 * examples, width))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    opt = make_optimizer(list(model.parameters()), "adamw")
    return second_step_peak(model, lambda: compute_loss(model, inputs), opt)


if __name__ == "__main__":
    rows, width, vocab, hidden = (int(a) for a in sys.argv[1:5])
    out = {amp: peaks(rows, width, vocab, hidden, amp == "amp") for amp in ("bf16-pure", "amp")}
    if len(sys.argv) > 5:  # CONFIG_JSON EXAMPLES WIDTH: a whole full fine-tuning step too
        out["full_step"] = full_step_peak(json.loads(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]))
    print(json.dumps(out))
