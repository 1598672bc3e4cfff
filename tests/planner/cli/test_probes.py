"""`planner probes list`: the stored records, newest first (records are made by `planner probe`, tested in
test_probe.py)."""
import json

from planner.spec import Knobs
from planner.store import Shapes, Store, make_record
from tests.planner.cli.helpers import planner


def test_list_filters_by_model_and_backend(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    k, sh = Knobs(), Shapes(micro_batch=1, grad_accum=1, seq_len=8)
    ids = [store.add(make_record(m, {"model_type": m}, k, sh, b, "ok", "d", peak_allocated_bytes=1))
           for m, b in (("a", "sim"), ("b", "cpu"), ("a", "cpu"))]
    store.close()
    listed = lambda *a: [r["id"] for r in json.loads(planner("probes", "list", *a, "--json", store=store.path).stdout)["records"]]
    assert listed() == ids[::-1]
    assert listed("--model", "a") == [ids[2], ids[0]]
    assert listed("--backend", "cpu", "--limit", "1") == [ids[2]]
    table = planner("probes", "list", store=store.path).stdout
    assert "cpu" in table and "sim" in table
