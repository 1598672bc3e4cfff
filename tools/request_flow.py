"""How one request flows through the planning core, per core module:
- entries: the distinct places (calling module, called function) where control comes into it from another module;
- re-entries: those of them, made by another core module, where one of its own calls is still open below (A calls
  B, B calls back into A); a library calling back (pydantic running a validator) is counted apart, as callbacks.
A pipeline that reads one way has no re-entry.

    python tools/request_flow.py                 (the README's first suggest, as POST /v1/plans gets it)
    python tools/request_flow.py --json BODY.json

Counts distinct call sites, not calls: `advise -> search -> advise.f` from a loop counts once per site.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

BODY = {"model": "llama-3.1-8b", "gpu": "a100-80gb", "gpus_per_node": 8, "global_batch": 256, "seq_len": 4096, "top": 5}


def _module(frame) -> str:
    return frame.f_globals.get("__name__", "")


def flow(run) -> dict[str, dict[str, int]]:
    """{"entries": {module: sites}, "reentries": {module: sites}, "callbacks": {module: sites}} while `run()`
    runs."""
    sites: dict[str, set] = {}
    entries: dict[str, set] = {}
    callbacks: dict[str, set] = {}

    def profile(frame, event, _arg):
        if event != "call":
            return
        mod = _module(frame)
        if not mod.startswith("planner.") or mod.startswith("planner.cli"):
            return
        caller = frame.f_back
        if caller is None or _module(caller) == mod:
            return
        entries.setdefault(mod, set()).add((_module(caller), frame.f_code.co_name))
        below = caller.f_back
        while below is not None:
            if _module(below) == mod:
                into = sites if _module(caller).startswith("planner.") else callbacks
                into.setdefault(mod, set()).add((_module(caller), frame.f_code.co_name))
                return
            below = below.f_back

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)

    def count(d: dict) -> dict[str, int]:
        return {m: len(s) for m, s in sorted(d.items())}

    return {"entries": count(entries), "reentries": count(sites), "callbacks": count(callbacks)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="a POST /v1/plans body (default: the README's first example)")
    args = ap.parse_args()
    body = json.loads(Path(args.json).read_text()) if args.json else BODY
    from planner import advise

    req = advise.parse(advise.SuggestRequest, body)
    counts = flow(lambda: advise.suggest(req))
    totals = {k: sum(v.values()) for k, v in counts.items()}
    print(json.dumps({"body": body, **counts, "totals": totals}, indent=1))


if __name__ == "__main__":
    main()
