"""ppl: a Stan-like probabilistic programming language for variational inference.

    import ppl
    model = ppl.Model.from_file("model.stan")   # or ppl.Model(code)
    fit = model.fit(data)                       # a dict, a pandas DataFrame or file paths
    fit.summary(); fit.stan_variable("theta"); fit.draws_pd(); fit.to_arviz()
    mode = model.optimize(data); model.laplace_sample(data)   # as CmdStanPy's

The API (ppl.api) is imported on first use, so `import ppl` stays cheap for the command line.
"""

__version__ = "0.1.0"

__all__ = ["Model", "Fit", "Optimum", "PplError", "PplWarning", "UnreliableFitWarning", "to_arviz"]


def __getattr__(name: str):
    if name in ("Model", "Fit", "Optimum", "to_arviz"):
        from ppl import api

        return getattr(api, name)
    if name in ("PplError", "PplWarning", "UnreliableFitWarning"):
        from ppl import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'ppl' has no attribute {name!r}")
