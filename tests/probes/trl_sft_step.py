"""Two training steps of a small, large-vocabulary Llama (fp32, CPU) under TRL 1.16's SFTTrainer or transformers'
Trainer, the live bytes of the second step's peak counted by probes.tracker.LiveBytes (the AdamW states live, as
memplan plans a step); prints one JSON line. Run by tests/probes/test_trl_sft_head.py.

    python tests/probes/trl_sft_step.py {hf|trl} CONFIG_DIR

TRL's fused log-prob head runs Triton kernels on CUDA that allocate nothing beyond TRL's own buffers; on CPU it
runs a torch fallback of the same tiles (trl/kernels/chunked_logprob.py: _forward_tile, _backward_tile) whose
temporaries the CUDA path does not make. Those two functions run with the tracker switched off: their in-place
writes into TRL's buffers are counted, their temporaries are not, which is what the CUDA path allocates.
"""

import json
import sys

import torch

from probes.tracker import LiveBytes

H, LAYERS, VOCAB, T, B = 256, 2, 65536, 512, 2


def model(config_dir: str, vocab: int = VOCAB):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=H,
        intermediate_size=688,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=vocab,
        max_position_embeddings=T,
        tie_word_embeddings=False,
        use_cache=False,
        attn_implementation="sdpa",
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    cfg.save_pretrained(config_dir)  # what `planner check --model CONFIG_DIR` reads
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).float()


def tokenizer():
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({"<pad>": 0, "<eos>": 1, "a": 2}, unk_token="a"))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="a")


def rows(kind: str, vocab: int = VOCAB):
    from datasets import Dataset

    ids = torch.randint(2, vocab, (B, T), generator=torch.Generator().manual_seed(1)).tolist()
    extra = {"attention_mask": [[1] * T] * B, "labels": ids} if kind == "hf" else {}
    return Dataset.from_dict({"input_ids": ids, **extra})


def untracked(fn):
    from torch.utils._python_dispatch import _disable_current_modes

    def run(*a, **k):
        with _disable_current_modes():
            return fn(*a, **k)

    return run


def main(kind: str, config_dir: str) -> None:
    from transformers import Trainer, TrainerCallback, TrainingArguments

    net, t = model(config_dir), LiveBytes()

    class SecondStep(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if state.global_step == 1:
                t.reset_peaks()

    common = {
        "output_dir": f"{config_dir}/run",
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "per_device_train_batch_size": B,
        "max_steps": 2,
        "report_to": [],
        "save_strategy": "no",
        "gradient_checkpointing": False,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        "optim": "adamw_torch_fused",
        "seed": 0,
    }
    if kind == "hf":
        trainer = Trainer(
            model=net, args=TrainingArguments(**common), train_dataset=rows(kind), callbacks=[SecondStep()]
        )
    else:
        import trl.kernels.chunked_logprob as kernels
        from trl import SFTConfig, SFTTrainer

        kernels._forward_tile, kernels._backward_tile = (
            untracked(kernels._forward_tile),
            untracked(kernels._backward_tile),
        )
        trainer = SFTTrainer(
            model=net,
            args=SFTConfig(**common, max_length=1024),
            train_dataset=rows(kind),
            processing_class=tokenizer(),
            callbacks=[SecondStep()],
        )
    t.add_existing(list(net.parameters()) + list(net.buffers()), "params")
    with t:
        trainer.train()
    print(json.dumps({"kind": kind, "peak_bytes": t.peak}))


if __name__ == "__main__":
    torch.set_num_threads(1)
    main(sys.argv[1], sys.argv[2])
