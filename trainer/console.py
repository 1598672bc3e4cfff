"""The trainer's console: progress and messages on stderr (rich), apart from any JSON on stdout."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def err_console():
    from rich.console import Console

    return Console(stderr=True)


def quiet_third_party() -> None:
    """Keep a rank's output to what the user needs: torch's, transformers' and DeepSpeed's deprecation
    warnings (DeepSpeed 0.19 calls torch's deprecated all_gather_into_tensor every step) and DeepSpeed's
    INFO log are dropped; MEMPLAN_VERBOSE=1 keeps everything."""
    import logging
    import os
    import warnings

    if os.environ.get("MEMPLAN_VERBOSE") == "1":
        return
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")  # read when datasets is first imported
