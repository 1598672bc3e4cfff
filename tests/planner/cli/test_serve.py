"""`planner serve`: flags and MEMPLAN_* settings checked before uvicorn starts (the API itself:
tests/api/)."""

import pytest

from tests.planner.cli.helpers import one_line_error, planner

pytest.importorskip("fastapi")


@pytest.mark.parametrize(
    "args,env,needle",
    [
        (["--port", "99999"], {}, "--port 99999: must be an integer from 1 to 65535"),
        (["--port", "0"], {}, "--port 0: must be an integer >= 1"),
        (["--workers", "65"], {}, "--workers 65: must be an integer from 1 to 64"),
        (
            [],
            {"MEMPLAN_PORT": "99999"},
            "--port '99999': Input should be less than or equal to 65535 (from the MEMPLAN_*",
        ),
    ],
)
def test_bad_settings_are_one_line_before_the_server_starts(args, env, needle):
    """Issue 12: --port 99999 gave a traceback."""
    one_line_error(planner("serve", *args, env=env, timeout=30), needle)
