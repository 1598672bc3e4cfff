"""A Hugging Face id memplan does not know, resolved with network access: its `config.json` alone fetched with
huggingface_hub into the local Hugging Face cache (where caches.cached reads it next time), HF_ENDPOINT and
HF_HUB_OFFLINE honoured. It owns when a fetch is made (env MEMPLAN_HUB=0 turns it off; the API turns it off for its
requests unless its settings allow it: `allowed`), the one-line answers where the Hub refuses (a missing, private or
gated repo), and the clause the "which model is ...?" question gains where the Hub was not asked or not reached.
huggingface_hub (2.4.0 read; only calls 0.20 has too, run against 0.36.2 and 1.33.0 as well) is imported only when a
fetch is made: planning never waits on it otherwise.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from planner.errors import BadInput
from planner.intake import caches
from planner.intake.limits import MAX_FILE_BYTES, OverLimit, refuse

TIMEOUT_S = 10.0  # one HEAD's wait (huggingface_hub's DEFAULT_ETAG_TIMEOUT, constants.py:37); HF_HUB_ETAG_TIMEOUT wins
DEFAULT_ENDPOINT = "https://huggingface.co"  # huggingface_hub constants.py:67-69: HF_ENDPOINT, trailing / dropped
# an `Org/Name` id as the Hub spells one (huggingface_hub utils/_validators.py:28-39, REPO_ID_REGEX: ASCII, 96
# characters a part, no leading or trailing `-`/`.`), never `--` or `..` nor ending `.git` (validate_repo_id,
# :138-149); a path is not one
REPO_ID = re.compile(r"\w(?:[\w.-]{0,94}\w)?/\w(?:[\w.-]{0,94}\w)?", re.ASCII)
_ALLOWED: ContextVar[bool] = ContextVar("memplan_hub_allowed", default=True)
RETRY_S = 60.0  # a Hub not reached is asked again after this long: an API worker outlives an outage
_ASKED: dict[tuple[str, str], tuple[float, Fetched | str | BadInput]] = {}  # (endpoint, id) -> (when, what it gave)


@dataclass(frozen=True)
class Fetched:
    path: Path  # the cached config.json (HF_HUB_CACHE's models--Org--Name/snapshots/<commit>/config.json)
    how: str  # "config.json fetched from <endpoint> (revision <commit>)"


@contextmanager
def allowed(yes: bool) -> Iterator[None]:
    """Fetching on (the CLI's default) or off (the API's, for requests it cannot trust) within the block."""
    token = _ALLOWED.set(yes)
    try:
        yield
    finally:
        _ALLOWED.reset(token)


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _true(name: str) -> bool:
    """huggingface_hub's reading of a switch (constants.py:16-19, _is_true: 1, ON, YES, TRUE in any case)."""
    return os.environ.get(name, "").upper() in {"1", "ON", "YES", "TRUE"}


def not_asked() -> str | None:
    """Why no fetch is made now, or None where one may be: read at each call, not at import as huggingface_hub's
    constants are (constants.py:194, HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)."""
    if os.environ.get("MEMPLAN_HUB", "").strip() == "0":
        return "MEMPLAN_HUB=0: the Hugging Face Hub was not asked"
    if not _ALLOWED.get():
        return "this server does not fetch from the Hugging Face Hub (MEMPLAN_FETCH_MODELS=1 lets it)"
    if _true("HF_HUB_OFFLINE") or _true("TRANSFORMERS_OFFLINE"):
        return "offline mode, HF_HUB_OFFLINE=1: the Hugging Face Hub was not asked"
    return None


def is_repo_id(name: str) -> bool:
    return bool(REPO_ID.fullmatch(name)) and "--" not in name and ".." not in name and not name.endswith(".git")


def fetch(repo_id: str) -> Fetched | None:
    """`repo_id`'s config.json from the Hub into the local cache; None where no fetch is made, the Hub is not reached
    (`clause` says why) or refuses it (`refusal` says what it answered); OverLimit where the config is over the limits.
    A process asks once an id (again after RETRY_S where the Hub was not reached)."""
    if not is_repo_id(repo_id) or not_asked() is not None:
        return None
    key = (endpoint(), repo_id)
    when, got = _ASKED.get(key, (0.0, None))
    if got is None or (isinstance(got, str) and time.monotonic() - when > RETRY_S):
        try:
            got = _download(repo_id, key[0])
        except BadInput as e:
            got = e
        _ASKED[key] = (time.monotonic(), got)
    if isinstance(got, OverLimit):
        raise got
    return got if isinstance(got, Fetched) else None


def fetched_how(path: Path) -> str | None:
    """How a cached config.json came, where this process fetched it (a configuration is read more than once: each
    release line it allows); None otherwise."""
    return next((got.how for _, got in _ASKED.values() if isinstance(got, Fetched) and got.path == path), None)


def refusal(name: str) -> BadInput | None:
    """The one line saying what the Hub answered an id it refused (a missing, private or gated repo)."""
    got = _ASKED.get((endpoint(), name), (0.0, None))[1] if not_asked() is None else None
    return got if isinstance(got, BadInput) and not isinstance(got, OverLimit) else None


def clause(name: str) -> str:
    """` (<why the Hub did not resolve it>)` for the question asked of an id not found, or "" where it is no id."""
    if not is_repo_id(name):
        return ""
    why = not_asked() or _ASKED.get((endpoint(), name), (0.0, None))[1]
    return f" ({why})" if isinstance(why, str) else ""


def _timeout() -> float:
    env = os.environ.get("HF_HUB_ETAG_TIMEOUT", "")
    return float(env) if env.replace(".", "", 1).isdigit() and float(env) > 0 else TIMEOUT_S


def _download(repo_id: str, url: str) -> Fetched | str:
    """One HEAD without retries first (get_hf_file_metadata, file_download.py:1618-1690: hf_hub_download itself
    retries an unreachable Hub for up to 60 s, :1170-1191), its size checked before any download; then
    hf_hub_download into caches.cache_dirs()[0], the folder caches.cached reads (file_download.py:1093 and :747-756
    models--Org--Name, :1242 and :727-744 refs/main, :1201 snapshots/<commit>/config.json). A string says why
    nothing came; an endpoint not reached answers before huggingface_hub is imported (~0.25 s)."""
    if why := _unreachable(url):
        return why
    # no telemetry: huggingface_hub's user agent otherwise first GETs {endpoint}/api/agent-harnesses (utils/_headers.py
    # :183-189, utils/_detect_agent.py:188-203), a request memplan does not need; read at its import (constants.py:245)
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.utils import HfHubHTTPError  # where 0.20 and 2.4.0 both export it

    cache = caches.cache_dirs()[0]
    try:
        meta = get_hf_file_metadata(hf_hub_url(repo_id, "config.json", endpoint=url), timeout=_timeout())
        if meta.commit_hash is None or meta.etag is None:  # file_download.py:1789-1804 asks for both
            return f"{url} did not answer as the Hugging Face Hub does (no X-Repo-Commit or ETag header)"
        if meta.size is not None and meta.size > MAX_FILE_BYTES:
            refuse(f"{repo_id}'s config.json at {url}: {meta.size:,} bytes, over {MAX_FILE_BYTES >> 20} MiB")
        path = hf_hub_download(repo_id, "config.json", endpoint=url, cache_dir=cache, etag_timeout=_timeout())
    except HfHubHTTPError as e:
        raise BadInput(_refused(repo_id, url, e), "model") from None
    except _unreached() as e:
        return f"the Hugging Face Hub at {url} was not reached: {type(e).__name__}"
    return Fetched(Path(path), f"config.json fetched from {url} (revision {meta.commit_hash})")


def _unreachable(url: str) -> str | None:
    """Why no TCP connection to the endpoint opens within the timeout, or None where one does or a proxy stands
    between (huggingface_hub's requests then go through it). huggingface_hub before 1.0 retries a HEAD that reaches
    nothing five times, 23 s in all (0.36.2 file_download.py:306, utils/_http.py:213-225): this answers at once."""
    import socket
    import urllib.request
    from urllib.parse import urlsplit

    u = urlsplit(url)
    if not u.hostname or (urllib.request.getproxies().get(u.scheme) and not urllib.request.proxy_bypass(u.hostname)):
        return None
    try:
        socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)), _timeout()).close()
    except OSError as e:
        return f"the Hugging Face Hub at {url} was not reached: {type(e).__name__}"
    return None


def _unreached() -> tuple[type[BaseException], ...]:
    """What a request that reached no Hub raises: huggingface_hub 0.x's requests errors and OfflineModeIsEnabled are
    OSErrors (LocalEntryNotFoundError too); 1.x's httpx and 2.x's httpx2 raise their TransportError."""
    return (OSError, *(m.TransportError for m in map(sys.modules.get, ("httpx", "httpx2")) if m is not None))


def _refused(repo_id: str, url: str, e) -> str:
    """The Hub's answer to a missing, private or gated repo (or one without config.json) in one line: its status and
    X-Error-Message (huggingface_hub utils/_http.py:870-871 reads the same), else its reason phrase."""
    r = e.response  # httpx's (reason_phrase) or, before huggingface_hub 1.0, requests' (reason)
    reason = getattr(r, "reason_phrase", None) or getattr(r, "reason", None) or type(e).__name__
    said = (r.headers.get("X-Error-Message") if r is not None else None) or reason
    return (
        f"model {repo_id!r}: the Hugging Face Hub at {url} answered {r.status_code if r is not None else 'an error'} "
        f"({said}): give --model PATH (its config.json: `hf download {repo_id} config.json` after `hf auth login` "
        f"where it is gated or private)"
    )
