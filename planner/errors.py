"""The one error type the CLI turns into exit code 2 with a one-line message (the API into a 422 whose
`loc` is the field)."""

from __future__ import annotations


class BadInput(ValueError):
    """Input the user can fix: the message names the bad value and what is accepted; `field` is the
    request field it is about (snake_case, as in the API body; the CLI flag is the same with dashes)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class UnknownName(BadInput):
    """A model or GPU name that is not in the catalog (the message lists the known ones)."""


class Forbidden(BadInput):
    """A path outside the directories a service may read (the API answers 403)."""
