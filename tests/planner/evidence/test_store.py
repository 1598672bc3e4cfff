"""The SQLite probe store."""

import sqlite3

import pytest

from planner.config.spec import Knobs
from planner.errors import BadInput
from planner.evidence.store import SCHEMA_VERSION, ProbeRecord, Shapes, Store, arch_hash, tensor_key

CFG = {"model_type": "llama", "hidden_size": 8}


def _rec(device="fake-cpu", accum=1, **kw):
    shapes = Shapes(micro_batch=1, grad_accum=accum, seq_len=16)
    return ProbeRecord(
        model="m",
        arch=arch_hash(CFG),
        tensor_key=tensor_key(CFG, Knobs(), shapes),
        backend="sim",
        status="ok",
        device=device,
        versions={"torch": "x"},
        knobs=Knobs(),
        shapes=shapes,
        peak_allocated_bytes=1024,
        **kw,
    )


def test_wal_schema_version_and_roundtrip(tmp_path):
    st = Store(tmp_path / "p.sqlite")
    assert st.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert st.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)
    rid = st.add(_rec())
    got = st.by_tensor_key(_rec().tensor_key)
    assert [r.id for r in got] == [rid] and got[0].peak_allocated_bytes == 1024
    assert Store(tmp_path / "p.sqlite").list(model="m")[0].id == rid  # reopened


def test_keys():
    a, b = _rec(device="NVIDIA H100 80GB HBM3"), _rec(device="fake-cpu")
    assert a.tensor_key == b.tensor_key and a.fingerprint != b.fingerprint
    assert _rec(accum=2).tensor_key == _rec(accum=8).tensor_key != _rec(accum=1).tensor_key


def test_newer_schema_refused(tmp_path):
    path = tmp_path / "p.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(BadInput, match="schema version 99"):
        Store(path)


def test_not_a_database(tmp_path):
    bad = tmp_path / "x.sqlite"
    bad.write_text("not sqlite at all" * 100)
    with pytest.raises(BadInput, match="cannot open"):
        Store(bad)
