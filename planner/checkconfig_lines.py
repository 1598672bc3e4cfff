"""Which release line `check --config` plans where the files leave it open (Reading.releases, planner.intake.releases):
the hungriest of the lines the files allow when every field is set (each line read and checked), or, where a field
is left open to its own search, the line read or the oldest other that takes the files. A line that refuses the files
is skipped and named beside the verdict (planner.config.release.choice_text). `config_body`: planner.checkconfig's,
the request body a reading gives under the flags."""

from __future__ import annotations

from planner import advise
from planner.config import requests
from planner.errors import BadInput
from planner.frameworks import FRAMEWORKS, split_name


def release_given(overrides: dict) -> bool:
    """--framework NAME@RELEASE (or a name that is another's release, trl-0) given beside the files."""
    text = overrides.get("framework")
    if not isinstance(text, str):
        return False
    name, release = split_name(text)
    return bool(release) or bool(name in FRAMEWORKS and FRAMEWORKS[name].same_as)


def hungrier_release(paths, allowed, overrides: dict, reading, kwargs: dict, config_body):
    """(the reading to plan, what each release gave) over the release lines the files allow (Reading.releases): each
    read as --framework NAME@RELEASE would read it and checked (its verdict only); a line that refuses the files in
    one line, read or planned, is skipped (`failed`: its refusal). The hungrier is answered: of the lines that do not
    fit where any does not, else of all, the one needing the most (`planned`; `read`, the line the files were read
    at)."""
    from planner import intake

    name = reading.framework
    fw = FRAMEWORKS[name]
    planned = split_name(str(reading.request.get("framework", name)))[1] or fw.newest.name
    if planned not in reading.releases:  # memplan's own adapter planned it (the line refused a setting)
        planned = max(reading.releases, key=lambda r: fw.release(r).first or ())
    readings, needs, failed = {}, {}, {}
    for r in reading.releases:
        given = {**overrides, "framework": f"{name}@{r}"}
        try:  # a line that refuses the files (a model its actor does not load) is skipped, its refusal kept
            readings[r] = reading if r == planned else intake.read(paths, allowed, given=given, release_why=_CHOSEN)
            if readings[r].refused and "workload" not in overrides:
                raise BadInput(readings[r].refused, "workload")
            body = {**config_body(readings[r], overrides).body, "verify": False}  # a probe runs for the answer only
            plan = advise.check(advise.parse(requests.CheckRequest, body), alternatives=False, **kwargs)
        except BadInput as e:
            failed[r] = str(e)
            continue
        needs[r] = (plan.plan.fits, plan.plan.memory.device_total_bytes)
    fits = [r for r in needs if needs[r][0]]
    short = [r for r in needs if not needs[r][0]]
    out = {"allowed": list(reading.releases), "fits": fits, "does_not_fit": short, "failed": failed}
    # the worst case leads: of the lines that do not fit where any does not, else of all, the one needing the most
    # (the line read where it needs as much)
    pool = short or fits
    if not pool:
        return reading, {**out, "planned": planned}
    chosen = max(pool, key=lambda r: (needs[r][1], r == planned))
    return readings[chosen], {**out, "planned": chosen, "read": planned}


_CHOSEN = "memplan assumption (the hungriest of the releases the files allow)"


def runnable_release(paths, allowed, overrides: dict, reading, config_body):
    """Where a field is left open (planned by its own search, not per line): the line the files were read at, or, where
    that line refuses them (ms-swift before 3.7 runs no DPO under sequence parallel), the oldest other line they
    allow that takes them, each refusal kept (`failed`, named as skipped beside the verdict); (reading, None) where
    the line read takes them or none does (its refusal is the answer)."""
    from planner import intake

    name = reading.framework
    read = split_name(str(reading.request.get("framework", name)))[1]
    failed = {}
    for r in (read, *(x for x in reading.releases if x != read)):
        try:
            got = reading if r == read else intake.read(paths, allowed, given={**overrides, "framework": f"{name}@{r}"})
            if got.refused and "workload" not in overrides:
                raise BadInput(got.refused, "workload")
            req = advise.parse(requests.CheckRequest, config_body(got, overrides).body)
            advise.knobs_of(req, req.precision or "bf16")  # the release's combination rules (spec_rules)
        except BadInput as e:
            failed[r] = str(e)
            continue
        if not failed:
            return reading, None
        return got, {"allowed": list(reading.releases), "fits": [], "does_not_fit": [], "failed": failed, "planned": r}
    return reading, None
