"""One exception type for bad input: the CLI prints its message as one line, never a traceback."""


class BonError(Exception):
    """A user-facing error; the message names the file or item and what is wrong with it."""
