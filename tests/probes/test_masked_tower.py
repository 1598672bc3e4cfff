"""planner.estimate.vision.masked_tower_bytes against torch: one Qwen2-VL tower block's attention as transformers
4.45.2 writes it (VisionSdpaAttention, modeling_qwen2_vl.py:398-404: a [1, N, N] bool mask over the call's patches,
SDPA on 3-D q, k, v), run on torch's math backend (CUDA's fused kernels refuse 3-D tensors: sdp_utils
check_tensor_shapes), its live bytes traced by probes.tracker at two sizes to part the N x N terms from the
linear ones.

Measured when pinned (torch 2.13 CPU, 16 heads of 80 as Qwen2-VL's tower, N = 256 and 512): bf16, half-precision
reductions allowed (what torch before the upcast ran) 67 N^2 in a frozen forward, 96 N^2 with its backward; fp32 133
and 192; bf16 at torch's default (the math path upcast to fp32) 131 and 192, above the bf16 count: the term is a lower
bound there."""

import pytest

torch = pytest.importorskip("torch")
from torch.nn.attention import SDPBackend, sdpa_kernel

from planner.estimate.vision import masked_tower_bytes
from planner.model.catalog import load_model
from probes.tracker import LiveBytes

HEADS, HEAD_DIM = 16, 80  # Qwen2-VL-7B's tower: embed_dim 1280, 16 heads


def qwen2_vl_445_attention(q, k, v, cu_seqlens: list[int]):
    """transformers 4.45.2 modeling_qwen2_vl.py:398-406 (VisionSdpaAttention.forward after the rotary embedding)."""
    n = q.shape[0]
    mask = torch.zeros([1, n, n], dtype=torch.bool)
    for i in range(1, len(cu_seqlens)):
        mask[..., cu_seqlens[i - 1] : cu_seqlens[i], cu_seqlens[i - 1] : cu_seqlens[i]] = True
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), mask, dropout_p=0.0
    )
    return out.transpose(0, 1)


def peak(n: int, dtype, trained: bool, reduce_half: bool) -> int:
    q, k, v = (torch.randn(n, HEADS, HEAD_DIM, dtype=dtype, requires_grad=trained) for _ in range(3))
    was = torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(reduce_half)
    try:
        with sdpa_kernel(SDPBackend.MATH), LiveBytes() as t, torch.set_grad_enabled(trained):
            out = qwen2_vl_445_attention(q, k, v, [0, n // 2, n])  # two images in the call
            if trained:
                out.backward(torch.ones_like(out))
    finally:
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(was)
    return t.peak


def square_bytes(dtype, trained: bool, reduce_half: bool = True) -> int:
    """The N x N coefficient: peak(512) - 2 peak(256) = 131072 a (the linear terms cancel)."""
    return (peak(512, dtype, trained, reduce_half) - 2 * peak(256, dtype, trained, reduce_half)) // (2 * 256 * 256)


@pytest.mark.parametrize("trained", [False, True], ids=["frozen-forward", "trained-backward"])
@pytest.mark.parametrize("dtype,profile", [(torch.bfloat16, "half"), (torch.float32, "fp32")], ids=["bf16", "fp32"])
def test_the_math_backends_square_terms_are_the_planned_ones(dtype, profile, trained):
    v = load_model("qwen2-vl-7b").vision
    assert (v.heads, v.hidden // v.heads) == (HEADS, HEAD_DIM)
    assert masked_tower_bytes(v, 1, profile, trained) == square_bytes(dtype, trained)


def test_torchs_upcast_of_the_math_path_only_adds():
    v = load_model("qwen2-vl-7b").vision
    for trained in (False, True):
        assert square_bytes(torch.bfloat16, trained, reduce_half=False) >= masked_tower_bytes(v, 1, "half", trained)
