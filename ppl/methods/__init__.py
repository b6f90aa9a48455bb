"""The fit methods, one module each, behind one table: METHODS maps every `--method` name to
its ppl.methods.base.Method. The CLI's choices, `ppl ir --method`, the API and ppl.pipeline's
dispatch all read it; a method added at run time with `register` is a method everywhere."""

from __future__ import annotations

from ppl.errors import ModelError
from ppl.methods.advi import ADVI_MEANFIELD, FULLRANK, MEANFIELD
from ppl.methods.auto import AUTO
from ppl.methods.base import DEFAULTS, FitOptions, Fitted, Method
from ppl.methods.bbvi import BBVI
from ppl.methods.dsvi import DSVI
from ppl.methods.result import FitResult
from ppl.methods.svi import SVI_METHOD

#: Every --method, by name, in the order `ppl fit --help` lists them.
METHODS: dict[str, Method] = {}


def register(method: Method) -> Method:
    """Make `method` a --method of `ppl fit` and `ppl ir`, of ppl.Model.fit and ppl.pipeline."""
    METHODS[method.name] = method
    return method


def method_named(name: str) -> Method:
    """The method `--method name` means; a ModelError naming the choices if none."""
    if name not in METHODS:
        raise ModelError(f"unknown method '{name}'; choose one of {', '.join(METHODS)}")
    return METHODS[name]


for _method in (AUTO, ADVI_MEANFIELD, MEANFIELD, FULLRANK, BBVI(), DSVI(), SVI_METHOD):
    register(_method)

__all__ = ["DEFAULTS", "METHODS", "FitOptions", "FitResult", "Fitted", "Method", "method_named",
           "register"]
