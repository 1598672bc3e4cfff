"""The store's tests on both databases (issue 36 item 3): a SQLite file and a real PostgreSQL server (tests/engines),
with PostgreSQL's own parts: numbered migrations applied once by replicas opening one new database at once, a newer
schema refused, a bad URL said in one line without its password, and probe jobs claimed with FOR UPDATE SKIP LOCKED by
several queues at once, each job by one."""

import threading

import pytest

from planner.errors import BadInput
from planner.evidence import db as sql
from planner.evidence import migrations, runs
from planner.evidence.store import Store
from tests.planner.evidence.test_store import _rec


def test_records_and_run_steps_round_trip(store_at):
    st = Store(store_at)
    st.check_writable()
    a, b = st.add(_rec()), st.add(_rec(device="NVIDIA H100 80GB HBM3"))
    assert a != b and {r.id for r in st.by_tensor_key(_rec().tensor_key)} == {a, b}
    assert st.get(b).device == "NVIDIA H100 80GB HBM3" and st.has_arch(_rec().arch)
    assert [r.id for r in st.list(model="m", limit=1)] == [b]  # newest first
    ids = runs.add(st, [runs.RunStep(run="r1", step=s, model="m", allocated_bytes=100 * s) for s in (1, 2, 3)])
    assert len(set(ids)) == 3
    assert [s.step for s in runs.steps(st, "r1")] == [1, 2, 3]
    assert runs.summaries(st)[0]["allocated_bytes"] == 300
    assert st.delete([a]) == 1 and st.get(a) is None
    st.close()
    again = Store(store_at)  # reopened: nothing set up twice, nothing lost
    assert [r.id for r in again.list()] == [b] and len(runs.steps(again, "r1")) == 3
    again.close()


def test_replicas_opening_one_new_database_apply_each_migration_once(pg_url):
    errors = []

    def open_it():
        try:
            Store(pg_url).close()
        except Exception as e:  # noqa: BLE001 - collected, then asserted
            errors.append(e)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    db = sql.connect(pg_url)
    assert migrations.applied(db) == [m[0] for m in migrations.MIGRATIONS]
    assert db.execute("SELECT COUNT(*) FROM meta WHERE key='schema_version'").fetchone()[0] == 1
    db.close()


def test_a_newer_schema_is_refused(pg_url):
    Store(pg_url).close()
    db = sql.connect(pg_url)
    db.execute("INSERT INTO schema_migrations VALUES (99, 'from the future', 0)")
    db.close()
    with pytest.raises(BadInput, match="schema migration 99 is newer than this memplan's"):
        Store(pg_url)


def test_an_unreachable_server_is_one_line_without_its_password(pg_server):
    url = pg_server.url.replace("memplan@", "memplan:s3cret@").rsplit(":", 1)[0] + ":1/memplan"
    with pytest.raises(BadInput) as e:
        Store(url)
    msg = str(e.value)
    assert "s3cret" not in msg and "***" in msg and "cannot open as a probe store" in msg and "\n" not in msg


def test_queues_on_one_database_claim_each_job_once(pg_url, tmp_path):
    """Two queues (replicas), two slot threads each, claiming 40 jobs at once: FOR UPDATE SKIP LOCKED hands each job
    to exactly one of them."""
    from api.jobs import JobQueue
    from api.settings import Settings

    queues = [JobQueue(pg_url, 60, slots=["cpu"], settings=Settings(state_dir=tmp_path / f"host{i}")) for i in range(2)]
    with queues[0]._db() as db:
        for i in range(40):
            db.execute(
                "INSERT INTO jobs (id, status, model, backend, dedup, request, spec, created) "
                "VALUES (?, 'queued', 'm', 'sim', ?, '{}', '{}', ?)",
                (f"j{i:02d}", str(i), float(i)),
            )
    got: list[str] = []
    lock = threading.Lock()

    def claim(q, slot):
        while (c := q._claim(slot)) is not None:
            with lock:
                got.append(c[0])

    threads = [threading.Thread(target=claim, args=(q, f"cpu{k}")) for q in queues for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == [f"j{i:02d}" for i in range(40)]  # every job, none twice
    with queues[0]._db() as db:
        assert db.execute("SELECT COUNT(*) FROM jobs WHERE status='running'").fetchone()[0] == 40
