"""GaLore's projector update (planner.estimate.matrix_optim.svd_temp_bytes) against the CPU allocator's peak
(probes.allocations: torch.profiler's allocation events, which see the buffers a kernel allocates inside itself):
torch.linalg.svd(full_matrices=False) of an fp32 matrix factors a working copy of it beside U, S and Vh (CI runs
this one), and galore-torch 1.0's GaLoreProjector.project at an update step adds the fp32 copy of a half-precision
gradient (galore_projector.py:69-98; skipped without galore-torch, as tests/probes/test_matrix_optim.py says how to
install it). Measured 2026-12-05 (torch 2.13 CPU): 1.003-1.018x the term, the rest LAPACK's workspace (14,400 bytes
at 1024 x 256); cuSOLVER's on CUDA is not measured. The profiler's first start takes about 3 s."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from planner.estimate import matrix_optim
from probes.allocations import cpu_peak_bytes
from tests.probes.test_matrix_optim import CONFIG, DTYPES, LINEARS, WIDE_MLP, _setup

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


def _update_step(cls, dtype, config: dict) -> int:
    """The transient bytes of GaLoreAdamW's second step with update_proj_gap 1 (every step recomputes every
    projector), the model, the optimizer and the first step built under the same profiler."""
    built = {}

    def before():
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(**{k: v for k, v in config.items() if k not in ("model_type", "architectures")})
        model = transformers.LlamaForCausalLM(cfg).to(dtype)
        names = {
            f"{n}.weight" for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n.endswith(LINEARS)
        }
        target = [p for n, p in model.named_parameters() if n in names]
        other = [p for n, p in model.named_parameters() if n not in names]
        galore = {"rank": 8, "update_proj_gap": 1, "scale": 0.25, "proj_type": "std"}
        built["opt"] = cls([{"params": other}, {"params": target, **galore}], lr=1e-3)
        for step in range(2):
            ids = torch.randint(0, config["vocab_size"], (2, 16))
            model(input_ids=ids, labels=ids).loss.backward()
            if not step:
                built["opt"].step()
                built["opt"].zero_grad()
        built["model"] = model

    return cpu_peak_bytes(lambda: built["opt"].step(), before)[0]


@pytest.mark.parametrize("config", [CONFIG, WIDE_MLP], ids=["embedding-largest", "mlp-largest"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_an_update_step_is_each_svd_beside_what_the_tensor_before_it_left(dtype, config):
    """GaLoreAdamW's loop keeps the last tensor's denom and norm_grad bound while the next one projects: the up
    projection's SVD beside the gate's projected-back update (mlp-largest), the first q_proj's beside the head's
    denom and update (embedding-largest). Measured 2026-12-05 (torch 2.13 CPU): 1.023-1.073x the term (852,480 /
    983,552 / 311,552 / 196,864 bytes), the rest LAPACK's workspace and the projected denominators. GaLoreAdamW8bit's
    step is not measured so: bitsandbytes' CPU kernel allocates where its CUDA kernel works in place."""
    cls = pytest.importorskip("galore_torch").GaLoreAdamW
    measured = _update_step(cls, DTYPES[dtype][0], config)
    term = matrix_optim.low_rank_step_temp_bytes(_setup("galore-adamw", 8, "all-linear", config), DTYPES[dtype][1])
    assert term == pytest.approx(measured, rel=0.08)
