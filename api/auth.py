"""Who may ask this service anything (docs/api.md#security): the rules `planner serve` and create_app both refuse to
start on, the Host allow-list (DNS rebinding), and the bearer token on every path but the page's, the docs' and
/healthz. Imports nothing heavy at the top: the CLI refuses before it loads the server."""

from __future__ import annotations

import hmac
import ipaddress

from api.settings import LOOPBACK, MAKE_TOKEN, Settings

HEALTH = "/healthz"  # open, and answered under any Host name: load balancers check it by IP
# Closed by default: with a token set, every path needs it but these (the page, its files, the API's docs)
OPEN_PATHS = {"/", HEALTH, "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
OPEN_PREFIXES = ("/static/", "/static-offline-docs/")
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]  # as a Host header carries them


def wildcard(host: str) -> bool:
    """Whether `host` binds every interface (0.0.0.0, ::): it then answers to any name clients use."""
    try:
        return host.strip("[]") == "" or ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def refusal(s: Settings) -> str | None:
    """Why a server with these settings must not start, in one line; None when it may. --insecure waives both."""
    if s.insecure:
        return None
    if s.api_token is None and s.host not in LOOPBACK:
        return (
            f"--host {s.host}: listening beyond loopback needs MEMPLAN_API_TOKEN (make one: {MAKE_TOKEN}), "
            "or --insecure to serve without one"
        )
    if wildcard(s.host) and not s.allowed_hosts:
        return (
            f"--host {s.host} answers to any name: give the names clients use with --allowed-host NAME "
            "(MEMPLAN_ALLOWED_HOSTS), or --insecure to accept any"
        )
    return None


def waived(s: Settings) -> str | None:
    """What --insecure lets this server do that it would refuse otherwise, as one warning line; None: nothing."""
    if not s.insecure:
        return None
    what = []
    if s.api_token is None and s.host not in LOOPBACK:
        what.append(f"no MEMPLAN_API_TOKEN on {s.host} (anyone who reaches it reads; starting work is refused)")
    if allowed_hosts(s) == ["*"]:
        what.append("any Host name is accepted (no DNS-rebinding guard)")
    return f"--insecure: {'; '.join(what)}" if what else None


def allowed_hosts(s: Settings) -> list[str]:
    """The Host names answered: loopback's, --host's when it names one address, and --allowed-host's; every name
    (["*"]) only for a wildcard bind without names under --insecure."""
    if wildcard(s.host) and not s.allowed_hosts and s.insecure:
        return ["*"]
    bound = [] if wildcard(s.host) else [f"[{s.host}]" if ":" in s.host.strip("[]") else s.host.lower()]
    return list(dict.fromkeys(LOOPBACK_HOSTS + bound + s.allowed_hosts))


def bearer_ok(authorization: str, token: str) -> bool:
    """`Authorization: Bearer <token>`, compared in constant time."""
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


class BearerToken:
    """ASGI middleware: with a token configured, a request to any path but the open ones without `Authorization:
    Bearer <token>` gets a 401 (the JSON error every other one has), before routing: unknown paths included."""

    def __init__(self, app, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or self.token is None or is_open(scope["path"]):
            return await self.app(scope, receive, send)
        authorization = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
        if bearer_ok(authorization, self.token):
            return await self.app(scope, receive, send)
        from starlette.responses import JSONResponse

        detail = "missing or wrong bearer token: send Authorization: Bearer <MEMPLAN_API_TOKEN>"
        await JSONResponse({"detail": detail}, 401, headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)


class HostAllowList:
    """Starlette's TrustedHostMiddleware (a 400 for a Host header it does not list: DNS rebinding), /healthz aside."""

    def __init__(self, app, allowed_hosts: list[str]) -> None:
        from starlette.middleware.trustedhost import TrustedHostMiddleware

        self.app = app
        self.checked = TrustedHostMiddleware(app, allowed_hosts=allowed_hosts, www_redirect=False)

    async def __call__(self, scope, receive, send):
        await (self.app if scope.get("path") == HEALTH else self.checked)(scope, receive, send)
