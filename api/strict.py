"""JSON bodies read strictly, before FastAPI reads them: NaN, Infinity and numbers that overflow a double (1e999)
are not JSON's numbers and no field takes them; a lone surrogate is not text; nesting past MAX_DEPTH and integers
past MAX_DIGITS are not requests. Each is a 422 naming where it stands, never a 500 from the encoder that meets it
later (a 422 that echoes NaN or a surrogate back cannot be written as JSON)."""

from __future__ import annotations

import json
import math

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

MAX_DEPTH = 32  # the deepest request body (a probe's config.json inside its request) nests 6 levels
MAX_DIGITS = 64  # an integer field's bound is at most 2**63


class Refused(ValueError):
    pass


def _constant(name: str):
    raise Refused(f"{name} is not a number a request may hold (finite numbers only)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise Refused(f"{text[:40]} is outside the range of a double (finite numbers only)")
    return value


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise Refused(f"an integer of {len(text)} digits (at most {MAX_DIGITS})")
    return int(text)


def _walk(value, loc: tuple) -> None:
    """Refuse nesting deeper than MAX_DEPTH and text that is not UTF-8 (a lone surrogate), iteratively."""
    stack = [(value, loc)]
    while stack:
        v, where = stack.pop()
        if len(where) > MAX_DEPTH:
            raise RequestValidationError([_error(where[: MAX_DEPTH + 1], f"nested deeper than {MAX_DEPTH} levels")])
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, sub in items:
            if isinstance(k, str) and not _utf8(k):
                raise RequestValidationError([_error(where, "a key holds a lone surrogate (not UTF-8 text)")])
            stack.append((sub, (*where, k)))
        if isinstance(v, str) and not _utf8(v):
            raise RequestValidationError([_error(where, "text holds a lone surrogate (not UTF-8 text)")])


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _error(loc: tuple, msg: str) -> dict:
    return {"type": "json_invalid", "loc": ("body", *loc), "msg": msg, "input": None}


def check(body: bytes):
    """The body's JSON value; RequestValidationError (422) for a body FastAPI would read as JSON but no request may
    be; None for a body that is not JSON at all (FastAPI's own json_invalid answers it)."""
    try:
        value = json.loads(body, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except Refused as e:
        raise RequestValidationError([_error((), str(e))]) from None
    except RecursionError:
        raise RequestValidationError([_error((), f"nested deeper than {MAX_DEPTH} levels")]) from None
    except ValueError:  # not JSON at all: FastAPI's own json_invalid answers it
        return None
    _walk(value, ())
    return value


class StrictRoute(APIRoute):
    """A route whose JSON body passes `check` before FastAPI parses it (every router's route_class)."""

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def strict(request):
            kind = request.headers.get("content-type", "")
            if request.method in ("POST", "PUT", "PATCH") and (not kind or "json" in kind):
                body = await request.body()
                # Starlette's Request.json() cache: FastAPI reads the value, not the body again
                if body and (value := check(body)) is not None:
                    request._json = value
            return await handler(request)

        return strict
