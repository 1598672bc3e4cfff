"""`planner probes list`: the stored records, newest first (records are made by `planner probe`, tested in
test_probe.py)."""

import json

from planner.config.spec import Knobs
from planner.evidence.store import Shapes, Store, make_record
from tests.planner.cli.helpers import planner


def test_list_filters_by_model_and_backend(tmp_path):
    store = Store(tmp_path / "s.sqlite")
    k, sh = Knobs(), Shapes(micro_batch=1, grad_accum=1, seq_len=8)
    ids = [
        store.add(make_record(m, {"model_type": m}, k, sh, b, "ok", "d", peak_allocated_bytes=1))
        for m, b in (("a", "sim"), ("b", "cpu"), ("a", "cpu"))
    ]
    store.close()
    listed = lambda *a: [
        r["id"] for r in json.loads(planner("probes", "list", *a, "--json", store=store.path).stdout)["records"]
    ]
    assert listed() == ids[::-1]
    assert listed("--model", "a") == [ids[2], ids[0]]
    assert listed("--backend", "cpu", "--limit", "1") == [ids[2]]
    table = planner("probes", "list", store=store.path).stdout
    assert "cpu" in table and "sim" in table


def test_show_rm_and_read_commands_never_create_a_store(tmp_path):
    """Issue 13: there was no `probes show` or `probes rm`, and `probes list --store typo.sqlite` silently
    created an empty database."""
    from tests.planner.cli.helpers import one_line_error

    typo = tmp_path / "typo.sqlite"
    for verb in (["list"], ["show", "1"], ["rm", "1"]):
        one_line_error(planner("probes", *verb, "--store", str(typo)), "no probe store there")
    assert not typo.exists()
    store = Store(tmp_path / "s.sqlite")
    a, b = (
        store.add(
            make_record(
                "m",
                {"model_type": "m"},
                Knobs(),
                Shapes(micro_batch=1, grad_accum=1, seq_len=8),
                "sim",
                "ok",
                "d",
                peak_allocated_bytes=2**30,
                by_category={"params": 2**30},
            )
        )
        for _ in range(2)
    )
    store.close()
    shown = json.loads(planner("probes", "show", str(a), "--json", store=store.path).stdout)["record"]
    assert shown["id"] == a and shown["by_category"] == {"params": 2**30}
    assert "params GiB" in planner("probes", "show", str(a), store=store.path).stdout
    one_line_error(planner("probes", "rm", str(a), "99", store=store.path), "probe #99: no such record")
    assert planner("probes", "rm", str(a), store=store.path).returncode == 0
    listed = json.loads(planner("probes", "list", "--json", store=store.path).stdout)["records"]
    assert [r["id"] for r in listed] == [b]
