"""The one error type the CLI turns into exit code 2 with a one-line message."""


class BadInput(ValueError):
    """Input the user can fix: the message names the bad value and what is accepted."""


class UnknownName(BadInput):
    """A model or GPU name that is not in the catalog (the message lists the known ones)."""
