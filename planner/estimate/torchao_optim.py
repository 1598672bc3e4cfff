"""torchao's low-bit AdamW (transformers' optim adamw_torch_4bit / adamw_torch_8bit: AdamW4bit / AdamW8bit from
torchao.optim, torchao.prototype.low_bit_optim before torchao 0.11; transformers 5.25 trainer_optimizer.py:450-476):
the bytes of its two moment states. Read at torchao 0.18.0 (torchao/optim/):

- adam.py:71-78 _new_buffer: a parameter of 4096 elements or more whose count the block size divides gets a quantized
  state; any other keeps torch.zeros_like(p), in the parameter's dtype.
- subclass_4bit.py:115-130 OptimState4bit.zeros: codes, n/2 uint8 (two 4-bit codes a byte); scale, one fp32 a block;
  qmap, a 16-entry fp32 table (create_dynamic_map(True, 3, 4) signed, linspace(0, 1, 17)[1:] unsigned: :35-41).
- subclass_8bit.py:104-116 OptimState8bit.zeros: codes, n uint8; scale, one fp32 a block; qmap, 256 fp32 entries.
- adam.py:118-121: exp_avg (signed) and exp_avg_sq (unsigned); state["step"] is a CPU scalar (torch.tensor(0.0)).

The block: transformers 5.x passes optim_args block_size, 256 by default, to both (trainer_optimizer.py:471);
transformers 4.45-4.57 passes none, so torchao's own defaults hold (adam.py:352 AdamW4bit 128, :319 AdamW8bit 256):
4-bit on a 4.x line keeps 1/64 byte more a parameter (1.6% of its states), within the term's tolerance of that line.
Under ZeRO the client optimizer steps each flat fp32 partition (planner.estimate.zero), one quantized tensor: its
per-element bytes are trained.optimizer_state_bytes_per_param's; under FSDP each rank's local shard (adam.py:72).
"""

from __future__ import annotations

TORCHAO_OPTIMIZERS = ("adamw-torchao-4bit", "adamw-torchao-8bit")
TORCHAO_MIN_ELEMENTS = 4096  # adam.py:75: "follow bitsandbytes, only quantize tensors >= 4096 values"
TORCHAO_BLOCK = 256  # transformers 5.25 trainer_optimizer.py:471 optim_args block_size default
QMAP_ENTRIES = {"adamw-torchao-4bit": 16, "adamw-torchao-8bit": 256}
CODE_BITS = {"adamw-torchao-4bit": 4, "adamw-torchao-8bit": 8}


def quantized(numel: int, block: int = TORCHAO_BLOCK) -> bool:
    """Whether torchao quantizes the states of a tensor of `numel` elements (adam.py:75)."""
    return numel >= TORCHAO_MIN_ELEMENTS and numel % block == 0


def torchao_low_bit_state_bytes_per_tensor(
    optimizer: str, numel: int, param_bytes: int, block: int = TORCHAO_BLOCK
) -> int:
    """Both moments of one parameter tensor: codes + fp32 scale a block + the fp32 qmap, each; or two zeros_like."""
    if not quantized(numel, block):
        return 2 * numel * param_bytes
    one = numel * CODE_BITS[optimizer] // 8 + 4 * (numel // block) + 4 * QMAP_ENTRIES[optimizer]
    return 2 * one


def torchao_low_bit_state_bytes(
    optimizer: str, sizes: list[tuple[int, int]], param_bytes: int, block: int = TORCHAO_BLOCK
) -> int:
    """All trainable tensors' states: sizes are (elements of one tensor, how many), as trained.trainable_tensor_sizes."""
    return sum(c * torchao_low_bit_state_bytes_per_tensor(optimizer, n, param_bytes, block) for n, c in sizes)
