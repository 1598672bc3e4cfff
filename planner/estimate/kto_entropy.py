"""TRL v1.8.0 .. 1.13.x's KTO head from the whole logits (Framework.kto_entropy_copy, the trl@1.0, trl@1.7 and trl@1.10
lines): after the reference model's forward, _compute_loss takes the policy's token entropy for its metrics,
entropy_from_logits(shift_logits.detach()) (v1.9.0 trl/trainer/kto_trainer.py:1597; v1.8.0 :1588; 1.13.0 :1624), which
flattens the shifted logits with logits.reshape(-1, vocab) (v1.9.0 trl/trainer/utils.py:551), a copy, since the
[:, :-1] slice is not contiguous, and then takes log_softmax, its exp and their product over 128 rows at a time
(:552-555). Live at that moment, beside the saved activations: the policy's logits (`outputs`, a local of
_compute_loss; in fp32 selective_log_softmax saves them for logsumexp's backward, :506-509; in half precision its row
loop saves each row's log_softmax beside them, :511-516), the reference model's logits (`ref_outputs`, a local too,
:1544, while the reference runs in the step), the flattened copy and a chunk's three temporaries. Units: the compute
dtype's bytes of `tokens` x `vocab`. Measured on TRL 1.9.0's own functions (tracker, fp32 and bf16, 2 rows x 96
tokens, vocabulary 4,096: 3.99 and 4.98 copies before the reference's) and on whole CPU steps
(tests/planner/frameworks/trl/test_kto_entropy.py). v1.0.0 .. v1.5.x and v1.7.x take no entropy but keep index copies
of the policy's whole logits from its forward on (v1.0.0 trl/experimental/kto/kto_trainer.py:977-978, v1.7.0
:1341-1342): one copy of `rows` x `width` x `vocab` where this term holds one of `width` - 1 positions and a chunk;
their reference forward one logits copy over the plan's, their peak under it (measured at 1.0.0, 1.3.0, 1.5.1 and
1.7.1: the same test)."""

from __future__ import annotations

ENTROPY_CHUNK_ROWS = 128  # entropy_from_logits(logits, chunk_size=128) (v1.9.0 trl/trainer/utils.py:526)
CHUNK_TEMPORARIES = 3  # log_softmax's output, its exp and their product (v1.9.0 trl/trainer/utils.py:553-554)


def policy_logits_kept_bytes(tokens: int, vocab: int, dtype_bytes: int) -> int:
    """The policy's logits, and in half precision the rows' log_softmax saved beside them (fp32: logsumexp saves the
    logits themselves)."""
    return (1 if dtype_bytes >= 4 else 2) * dtype_bytes * tokens * vocab


def entropy_copy_bytes(rows: int, width: int, vocab: int, dtype_bytes: int) -> int:
    """entropy_from_logits' flattened copy of the shifted logits (width - 1 positions a row) and one chunk's
    temporaries."""
    shifted = rows * max(1, width - 1)
    chunk = CHUNK_TEMPORARIES * min(ENTROPY_CHUNK_ROWS, shifted) * vocab
    return dtype_bytes * (shifted * vocab + chunk)


def entropy_moment_bytes(rows: int, width: int, vocab: int, dtype_bytes: int, reference_logits: bool) -> int:
    """The head's bytes at the entropy's moment: the policy's kept logits, the reference's (`reference_logits`: the
    reference forward runs in the step), the flattened copy and a chunk."""
    tokens = rows * width
    ref = dtype_bytes * tokens * vocab if reference_logits else 0
    return (
        policy_logits_kept_bytes(tokens, vocab, dtype_bytes) + ref + entropy_copy_bytes(rows, width, vocab, dtype_bytes)
    )
