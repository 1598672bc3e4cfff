"""Fixtures the probe tests share."""

import pytest


@pytest.fixture
def one_thread():
    """One torch thread for the test: a tiny model's matmuls, LAPACK's SVD or Newton-Schulz otherwise take seconds
    on the shared CI cores (the bytes they allocate are the same). A module takes it with
    `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
