"""User-facing errors: the CLI prints them as one line and exits with code 2."""


class UserError(ValueError, TypeError):
    """A mistake in the user's input; the message names the problem and the fix.

    Both a ValueError and a TypeError, so a Python caller catches a wrong value or a wrong type of an
    argument the way Python's own functions raise it (`except ValueError`), or every fmm-fast mistake at
    once (`except fmm_fast.UserError`)."""
