"""GaLore's projector update (planner.estimate.matrix_step.svd_temp_bytes) against the CPU allocator's peak
(probes.allocations: torch.profiler's allocation events, which see the buffers a kernel allocates inside itself):
torch.linalg.svd(full_matrices=False) of an fp32 matrix factors a working copy of it beside U, S and Vh (CI runs
this one), and galore-torch 1.0's GaLoreProjector.project at an update step adds the fp32 copy of a half-precision
gradient (galore_projector.py:69-98; skipped without galore-torch, as tests/probes/test_matrix_optim.py says how to
install it). Measured 2026-12-05 (torch 2.13 CPU): 1.003-1.018x the term, the rest LAPACK's workspace (14,400 bytes
at 1024 x 256); cuSOLVER's on CUDA is not measured. Then GaLoreAdamW's whole second step in each framework's
parameter order (planner.estimate.matrix_step.galore_walk_bytes), with and without projector updates, the model built
under the same profiler so that every free is seen. The profiler's first start takes about 3 s."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from planner.config.spec import Knobs
from planner.estimate import matrix_step
from planner.estimate.setup import Setup
from planner.model.families import from_config
from probes.allocations import cpu_peak_bytes
from tests.probes.test_matrix_optim import CONFIG, DTYPES, LINEARS, WIDE_MLP

SHAPES = [(1024, 256), (256, 1024)]  # GaLore's right (m >= n) and left projections


pytestmark = pytest.mark.usefixtures("one_thread")  # one torch thread (tests/probes/conftest.py)


@pytest.mark.parametrize("shape", SHAPES)
def test_svd_factors_a_working_copy_beside_u_s_and_vh(shape):
    g = torch.randn(*shape)
    peak, _ = cpu_peak_bytes(lambda: torch.linalg.svd(g, full_matrices=False))
    assert matrix_step.svd_temp_bytes(shape, 4) == pytest.approx(peak, rel=0.03)


@pytest.mark.parametrize("dtype,state_bytes", [(torch.float32, 4), (torch.bfloat16, 2)])
@pytest.mark.parametrize("shape", SHAPES)
def test_galores_projector_update_is_the_svd_and_the_fp32_copy(shape, dtype, state_bytes):
    projector = pytest.importorskip("galore_torch.galore_projector").GaLoreProjector
    g = torch.randn(*shape, dtype=dtype)
    p = projector(16, update_proj_gap=200, scale=0.25, proj_type="std")
    peak, _ = cpu_peak_bytes(lambda: p.project(g, 0))
    assert matrix_step.svd_temp_bytes(shape, state_bytes) == pytest.approx(peak, rel=0.03)


def _groups(model, names: set[str], framework: str, low_rank: dict) -> list[dict]:
    """The optimizer's groups in the framework's order (planner.estimate.matrix_step.step_order), the targets' group
    with the keys `low_rank` gives."""
    target = [p for n, p in model.named_parameters() if n in names]
    rest = [p for n, p in model.named_parameters() if n not in names]
    vectors, matrices = [p for p in rest if p.dim() < 2], [p for p in rest if p.dim() >= 2]
    targets = {"params": target, **low_rank}
    if framework == "llamafactory":
        return [{"params": vectors}, {"params": matrices}, targets]
    if framework == "swift":
        return [targets, {"params": matrices}, {"params": vectors}]
    return [{"params": rest}, targets]


def second_step_bytes(cls, low_rank: dict, dtype, config: dict, framework: str) -> int:
    """The transient bytes of the optimizer's second step (cls over the framework's groups, the targets' with
    `low_rank`'s keys: its update_proj_gap 1 recomputes every projector, 200 none), the model, the optimizer and the
    first step built under the same profiler."""
    built = {}

    def before():
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(**{k: v for k, v in config.items() if k not in ("model_type", "architectures")})
        model = transformers.LlamaForCausalLM(cfg).to(dtype)
        names = {
            f"{n}.weight" for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and n.endswith(LINEARS)
        }
        built["opt"] = cls(_groups(model, names, framework, low_rank), lr=1e-3)
        for step in range(2):
            ids = torch.randint(0, config["vocab_size"], (2, 16))
            model(input_ids=ids, labels=ids).loss.backward()
            if not step:
                built["opt"].step()
                built["opt"].zero_grad()
        built["model"] = model

    return cpu_peak_bytes(lambda: built["opt"].step(), before)[0]


CASES = [(f, c, g, "fp32") for f in ("hf", "llamafactory", "swift") for c in ("embedding", "mlp") for g in (200, 1)]


@pytest.mark.parametrize(
    "framework,config,gap,dtype", CASES + [("hf", "embedding", 1, "bf16"), ("hf", "mlp", 1, "bf16")]
)
def test_galores_step_is_each_tensor_beside_what_the_one_before_it_left(framework, config, gap, dtype):
    """GaLoreAdamW's loop keeps the last tensor's denom and update bound while the next one steps: in LLaMA-Factory's
    and ms-swift's order the head's two beside the embedding's update (3x the head), in transformers' the first
    q_proj's SVD beside the head's two; the up projection's SVD beside the gate's update. Measured 2026-12-05 (torch
    2.13 CPU, fp32): 1.000-1.094x the term (393,228 bytes against 393,216 for the head after the embedding), the rest
    LAPACK's workspace and the projected denominators. GaLoreAdamW8bit's step is not measured so: bitsandbytes' CPU
    kernel allocates where its CUDA kernel works in place."""
    shape = {"embedding": CONFIG, "mlp": WIDE_MLP}[config]
    cls = pytest.importorskip("galore_torch").GaLoreAdamW
    galore = {"rank": 8, "scale": 0.25, "proj_type": "std", "update_proj_gap": gap}
    measured = second_step_bytes(cls, galore, DTYPES[dtype][0], shape, framework)
    knobs = Knobs(framework=framework, optimizer="galore-adamw", optimizer_rank=8, optimizer_targets=",".join(LINEARS))
    s = Setup(from_config(shape, "tiny-llama"), knobs, 1, 1, 16)
    term = matrix_step.low_rank_step_temp_bytes if gap == 1 else matrix_step.low_rank_steady_temp_bytes
    assert term(s, DTYPES[dtype][1]) == pytest.approx(measured, rel=0.10)
