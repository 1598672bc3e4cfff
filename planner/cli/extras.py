"""The CLI's extras check: planner/extras.py, which the API's probe jobs share (a command whose extra is not installed
is refused first, in one line naming the extra; exit code 2, nothing written)."""

from planner.extras import for_knobs, require, steps

__all__ = ["for_knobs", "require", "steps"]
