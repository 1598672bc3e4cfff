"""GaLore's projector update (planner.estimate.matrix_optim.svd_temp_bytes) against the CPU allocator's peak
(probes.allocations: torch.profiler's allocation events, which see the buffers a kernel allocates inside itself):
torch.linalg.svd(full_matrices=False) of an fp32 matrix factors a working copy of it beside U, S and Vh (CI runs
this one), and galore-torch 1.0's GaLoreProjector.project at an update step adds the fp32 copy of a half-precision
gradient (galore_projector.py:69-98; skipped without galore-torch, as tests/probes/test_matrix_optim.py says how to
install it). Measured 2026-12-05 (torch 2.13 CPU): 1.003-1.018x the term, the rest LAPACK's workspace (14,400 bytes
at 1024 x 256); cuSOLVER's on CUDA is not measured. The profiler's first start takes about 3 s."""

import pytest

torch = pytest.importorskip("torch")
from planner.estimate import matrix_optim
from probes.allocations import cpu_peak_bytes

SHAPES = [(1024, 256), (256, 1024)]  # GaLore's right (m >= n) and left projections


@pytest.fixture(autouse=True)
def one_thread():
    """One thread: LAPACK's SVD on the shared CI cores otherwise takes seconds (the bytes are the same)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("shape", SHAPES)
def test_svd_factors_a_working_copy_beside_u_s_and_vh(shape):
    g = torch.randn(*shape)
    peak, _ = cpu_peak_bytes(lambda: torch.linalg.svd(g, full_matrices=False))
    assert matrix_optim.svd_temp_bytes(shape, 4) == pytest.approx(peak, rel=0.03)


@pytest.mark.parametrize("dtype,state_bytes", [(torch.float32, 4), (torch.bfloat16, 2)])
@pytest.mark.parametrize("shape", SHAPES)
def test_galores_projector_update_is_the_svd_and_the_fp32_copy(shape, dtype, state_bytes):
    projector = pytest.importorskip("galore_torch.galore_projector").GaLoreProjector
    g = torch.randn(*shape, dtype=dtype)
    p = projector(16, update_proj_gap=200, scale=0.25, proj_type="std")
    peak, _ = cpu_peak_bytes(lambda: p.project(g, 0))
    assert matrix_optim.svd_temp_bytes(shape, state_bytes) == pytest.approx(peak, rel=0.03)
