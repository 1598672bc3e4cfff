"""One estimate per configuration within one request: `suggest` and `check` plan the same candidate more than once (a
check's alternatives, and the nearest settings' searches, each a suggest of its own, re-estimate the request's
families: 1,944 estimates of 895 configurations for Llama-3.1-70B on one RTX 4090). `per_request` opens a memo for
the work inside it (a nested suggest shares its caller's) and planner.search.estimates.make_plan reads it.

Scope: one request, nothing kept after it, so a probe stored in between or a changed file is
read by the next request. Keys are values, not objects: the model, hardware and goal by equality (a nested request
resolves its own equal copies), the knobs by their hash; evidence only where it is the analytic breakdown (no
calibrator, or one that holds no record and simulates nothing), which every such estimate shares.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Memo:
    """The plans estimated in one request, by configuration."""

    def __init__(self) -> None:
        self.plans: dict[tuple, object] = {}
        self._tokens: dict[int, int] = {}  # id(object) -> the number of its value
        self._values: list[object] = []  # one object per distinct value, its number its index
        self._alive: list[object] = []  # every object numbered: its id is not reused while the memo lives

    def token(self, obj: object) -> int:
        """A number per distinct value (equal objects share it); a request sees a handful of models, GPUs and goals."""
        t = self._tokens.get(id(obj))
        if t is None:
            t = next((i for i, v in enumerate(self._values) if type(v) is type(obj) and v == obj), len(self._values))
            if t == len(self._values):
                self._values.append(obj)
            self._tokens[id(obj)] = t
            self._alive.append(obj)
        return t


_ACTIVE: ContextVar[Memo | None] = ContextVar("memplan_plan_memo", default=None)


def active() -> Memo | None:
    return _ACTIVE.get()


@contextmanager
def per_request() -> Iterator[Memo]:
    """A memo for the work inside, or the caller's where one is open (planner.advise opens one per suggest and
    check)."""
    memo = _ACTIVE.get()
    if memo is not None:
        yield memo
        return
    memo = Memo()
    token = _ACTIVE.set(memo)
    try:
        yield memo
    finally:
        _ACTIVE.reset(token)
