"""Hostile JSON at every operation of a real `planner serve`: NaN, Infinity, 1e999, integers hundreds of digits
long, lone surrogates, deep nesting and wrong types, drawn by hypothesis into each operation's own fields (and
its path and query parameters). Not one 5xx and not one dropped connection (issue 51: 44 such requests were 500s).

MEMPLAN_FUZZ_EXAMPLES sets the examples per operation (else MEMPLAN_TEST_EXAMPLES; 2,000 by default, issue 51's
acceptance count, which `make test-all` runs; `make test` runs 500 and `make test-fast` 100)."""

import json
import os
import re
import tempfile
import urllib.parse
from pathlib import Path

import pytest

from tests.api.conftest import Server

httpx = pytest.importorskip("httpx")
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("MEMPLAN_FUZZ_EXAMPLES") or os.environ.get("MEMPLAN_TEST_EXAMPLES", "2000"))
HUGE = "__huge_number__"  # written as 1e999 into the body: json.dumps has no way to write it
SURROGATES = st.sampled_from([chr(0xD800), chr(0xDBFF), chr(0xDC00), chr(0xDFFF)])
TEXT = st.one_of(st.text(max_size=12), st.lists(st.one_of(st.characters(), SURROGATES), max_size=6).map("".join))
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**20, max_value=10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(HUGE),
    TEXT,
    st.just("/data/" + "a" * 4000),  # a 4,000-character path
)
JSON = st.recursive(SCALARS, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3), max_leaves=12)
DEEP = st.sampled_from([33, 999, 1001, 100_000]).map(lambda n: f"__deep_{n}__")  # written as n nested lists


def operations() -> list[tuple[str, str, list[str], list[str], list[str]]]:
    """(method, path, body fields, path parameters, query parameters) of every operation the app serves."""
    from api.main import create_app
    from api.settings import Settings

    # a store of this process's own: the app opens its file, and two pytest workers collecting at once locked a
    # shared one ("database is locked" at collection)
    store = Path(tempfile.mkdtemp(prefix="memplan-fuzz-")) / "schema.sqlite"
    schema = create_app(Settings(store=str(store))).openapi()
    parts = schema.get("components", {}).get("schemas", {})
    out = []
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            params = op.get("parameters", [])
            ref = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            body = parts.get(ref.get("$ref", "").rsplit("/", 1)[-1], {}).get("properties", {})
            out.append(
                (
                    method.upper(),
                    path,
                    sorted(body),
                    [p["name"] for p in params if p["in"] == "path"],
                    [p["name"] for p in params if p["in"] == "query"],
                )
            )
    return out


OPERATIONS = operations()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("fuzz") / "store.sqlite").start()
    yield s
    s.kill()


def encoded(body) -> bytes:
    text = json.dumps(body, allow_nan=True)  # ensure_ascii: a lone surrogate is written as its \\udXXX escape
    text = re.sub(r'"__deep_(\d+)__"', lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    return text.replace(json.dumps(HUGE), "1e999").encode()


@pytest.mark.parametrize(
    "method,path,fields,path_params,query", OPERATIONS, ids=[f"{m} {p}" for m, p, *_ in OPERATIONS]
)
def test_hostile_json_gets_a_4xx_never_a_5xx(served, method, path, fields, path_params, query):
    body = st.one_of(st.fixed_dictionaries({}, optional=dict.fromkeys(fields, st.one_of(JSON, DEEP))), JSON, DEEP)
    failures = []

    with served.client() as client:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
            derandomize=True,
        )
        @given(
            body=body if method in ("POST", "PUT", "PATCH") else st.none(),
            params=st.fixed_dictionaries({}, optional=dict.fromkeys(query, TEXT)),
            names=st.fixed_dictionaries(dict.fromkeys(path_params, TEXT)),
        )
        def call(body, params, names):
            url = re.sub(
                r"\{(\w+)\}",
                lambda m: urllib.parse.quote((names[m.group(1)] or "x").encode("utf-8", "surrogatepass"), safe=""),
                path,
            )
            query_text = urllib.parse.urlencode({k: v.encode("utf-8", "surrogatepass") for k, v in params.items()})
            content = encoded(body) if body is not None else None
            headers = {"content-type": "application/json"} if content is not None else {}
            try:
                r = client.request(
                    method, url + (f"?{query_text}" if query_text else ""), content=content, headers=headers
                )
            except httpx.HTTPError as e:  # the server dropped the connection
                failures.append((url, content[:200] if content else None, repr(e)))
                return
            if r.status_code >= 500:
                failures.append((url, content[:200] if content else None, r.status_code, r.text[:300]))

        call()
    assert not failures, failures[:3]
