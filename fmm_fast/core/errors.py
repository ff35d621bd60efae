"""User-facing errors: the CLI prints them as one line and exits with code 2."""


class UserError(Exception):
    """A mistake in the user's input; the message names the problem and the fix."""
