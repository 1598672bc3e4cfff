"""HF's Trainer.evaluate on CPU under the live-bytes tracker: the evaluation phase as HF runs it (prediction_step, the
logits kept for compute_metrics, eval_accumulation_steps), what planner.estimate.nograd's evaluation terms are pinned to
(tests/probes/test_eval_logits.py, benchmarks/accuracy_terms.py)."""

from __future__ import annotations

from pathlib import Path


def evaluate_peak(folder: Path, model_name: str, rows: int, seq: int, steps: int, metrics: bool) -> int:
    """Peak live bytes of one evaluation of `steps` x `rows` random rows of `seq` tokens (fp32, one rank), with
    eval_accumulation_steps = steps, with or without a compute_metrics."""
    import datasets
    import torch
    import transformers

    from planner.model.catalog import model_config
    from probes.tracker import LiveBytes

    cfg = model_config(model_name)
    mt = cfg.pop("model_type")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(mt, **cfg))
    ids = torch.randint(0, cfg["vocab_size"], (steps * rows, seq)).tolist()  # one accumulation round
    args = transformers.TrainingArguments(
        str(folder), per_device_eval_batch_size=rows, eval_accumulation_steps=steps, report_to=[], use_cpu=True
    )
    trainer = transformers.Trainer(
        model=model,
        args=args,
        eval_dataset=datasets.Dataset.from_dict({"input_ids": ids, "labels": ids}),
        compute_metrics=(lambda p: {"n": len(p.predictions)}) if metrics else None,
    )
    with LiveBytes() as tracker:
        trainer.evaluate()
    return tracker.peak
