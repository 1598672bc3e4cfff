"""The one error type the CLI turns into exit code 2 with a one-line message."""


class BadInput(ValueError):
    """Input the user can fix: the message names the bad value and what is accepted."""
