"""ppl: a Stan-like probabilistic programming language for variational inference."""

__version__ = "0.1.0"
