"""The one error type of the harness: a one-line cause, never a made-up figure."""


class BenchError(Exception):
    """Raised when a run cannot be measured or its result is wrong."""
