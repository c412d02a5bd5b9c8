"""How a batch run fails: one error type, a one-line reason the CLI prints as it is."""


class BatchError(RuntimeError):
    """A batch run cannot go on (nothing archived, a cutoff that would lose events...)."""
