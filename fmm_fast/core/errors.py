"""User-facing errors: the CLI prints them as one line and exits with code 2."""


class UserError(ValueError, TypeError):
    """A mistake in the user's input; the message names the problem and the fix.

    Both a ValueError and a TypeError, so a Python caller catches a wrong value or a wrong type of an
    argument the way Python's own functions raise it (`except ValueError`), or every fmm-fast mistake at
    once (`except fmm_fast.UserError`).

    Example: `fmm_fast.evaluate(model, seed="x")` raises UserError("fmm_fast.evaluate: seed='x' (str); give
    an integer or a list of integers"); `fmm-fast ...` prints such a message as one line and exits 2.
    """

    @property
    def command_message(self) -> str:
        """The message as the command line prints it (the same, but where it names a Python argument)."""
        return str(self)


class ArgumentError(UserError):
    """A wrong argument of a Python function: the message names the argument (`seed=`), and
    `command_message` the command's flag (`--seed`) when the command passed it on."""

    def __init__(self, message: str, flag: str, value: object, wanted: str) -> None:
        super().__init__(message)
        self.flag_line = f"--{flag.replace('_', '-')} {value}: give {wanted}"

    @property
    def command_message(self) -> str:
        return self.flag_line
