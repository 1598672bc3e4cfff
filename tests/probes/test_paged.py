"""bitsandbytes' paged optimizer states, as planner.estimate.state_terms.paged_optimizer_bytes counts them: read from
the installed bitsandbytes (the rule), and on a GPU measured (skipped without CUDA)."""

import inspect

import pytest

torch = pytest.importorskip("torch")
bnb = pytest.importorskip("bitsandbytes")
from planner.estimate import state_terms


def test_bitsandbytes_pages_the_states_of_tensors_of_1e5_elements_or_more():
    """The rule the term follows, in bitsandbytes' own get_state_buffer: a paged optimizer's buffer of a tensor of
    PAGED_MIN_ELEMENTS or more comes from get_paged, which asks CUDA for managed (unified) memory."""
    from bitsandbytes import functional
    from bitsandbytes.optim.optimizer import Optimizer8bit

    source = inspect.getsource(Optimizer8bit.get_state_buffer)
    assert f"p.numel() < {state_terms.PAGED_MIN_ELEMENTS:.0e}".replace("+0", "") in source.replace("+0", ""), source
    assert "F.get_paged(" in source
    assert "cget_managed_ptr" in inspect.getsource(functional.get_paged)
    assert bnb.optim.PagedAdamW(torch.nn.Linear(4, 4).parameters()).is_paged


@pytest.mark.skipif(not torch.cuda.is_available(), reason="measures CUDA's allocator: needs a GPU")
def test_paged_states_are_not_in_max_memory_allocated():
    layer = torch.nn.Linear(1024, 1024, device="cuda")  # 1,048,576 weights: paged; 1,024 biases: not
    opt = bnb.optim.PagedAdamW(layer.parameters())
    layer(torch.randn(8, 1024, device="cuda")).sum().backward()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    opt.step()
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before
    assert held < 8 * 1024 * 1024 // 4  # only the bias's states (and the allocator's rounding) are torch's
