"""recipe.dist.free_port: a port that binds, drawn between Ray's worker ports and the kernel's ephemeral range."""

from __future__ import annotations

import socket

from recipe.dist import FIRST_PORT, _ephemeral_low, free_port


def test_free_port_binds_and_lies_between_rays_worker_ports_and_the_ephemeral_range():
    low = _ephemeral_low()
    ports = {free_port() for _ in range(20)}
    assert FIRST_PORT == 20_000 and all(FIRST_PORT <= p < low for p in ports), ports
    assert len(ports) > 1  # drawn, not one fixed port
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports.pop()))


def test_ephemeral_low_reads_the_kernel_range_or_falls_back(tmp_path):
    f = tmp_path / "range"
    f.write_text("40000\t60999\n")
    assert _ephemeral_low(str(f)) == 40000
    assert _ephemeral_low(str(tmp_path / "missing")) == 32768


def test_free_port_skips_a_taken_port(monkeypatch):
    from recipe import dist

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        draws = iter([taken, taken, 23_456])

        class Rng:
            def randrange(self, a, b):
                return next(draws)

        monkeypatch.setattr(dist.random, "SystemRandom", Rng)
        monkeypatch.setattr(dist, "_ephemeral_low", lambda: 60_000)
        assert free_port() == 23_456
