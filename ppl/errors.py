"""Errors a user can cause: each carries a message meant to be printed as it is, exit code 2."""

from __future__ import annotations


class PplError(Exception):
    """Base of every user-facing error; the CLI prints the message and exits with code 2."""

    exit_code = 2


class ModelSyntaxError(PplError):
    """The model text does not parse."""


class ModelError(PplError):
    """The model parses but is wrong: undefined names, shape or type mismatches, bad arguments."""


class DataError(PplError):
    """The data files do not match the model's data block."""


class FitError(PplError):
    """The optimisation could not produce a trustworthy result (e.g. non-finite ELBO)."""


class SecondDerivativeError(ValueError):
    """A function that has gradients but no second derivatives (an ODE solution's forward
    sensitivities): Hessian-vector products go by differences of gradients instead
    (ppl.inference.hessian)."""


class PplWarning(UserWarning):
    """Base of the warnings ppl gives through Python's `warnings` module (a notebook's user can
    filter them by class, as CmdStanPy's and ArviZ's)."""


class UnreliableFitWarning(PplWarning):
    """The verdict on a fit is "not reliable": q is off the posterior for the parameters named."""
