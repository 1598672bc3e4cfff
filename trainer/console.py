"""The trainer's console: progress and messages on stderr (rich), apart from any JSON on stdout."""
from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def err_console():
    from rich.console import Console

    return Console(stderr=True)
