"""The 11 posteriordb posteriors of models/posteriordb, stated in PyMC and NumPyro.

Each translation keeps the Stan model's priors, constraints, likelihood and parameter names and
shapes. A constrained Stan parameter with no prior statement has an improper flat prior on its
support: `pm.Flat` / `pm.HalfFlat` and `dist.ImproperUniform` here. Sampling statements (`~`)
drop constants in Stan, so a half-normal or half-Cauchy prior on a `<lower=0>` parameter is
written as `HalfNormal` / `HalfCauchy`: the same density up to a constant.

Two models need care:

- garch-garch11: `real<lower=0, upper=(1 - alpha1)> beta1` with no prior is flat on
  (0, 1 - alpha1). `pm.Uniform(0, 1 - alpha1)` has density 1 / (1 - alpha1), so a
  `pm.Potential` of log(1 - alpha1) cancels it. NumPyro's autoguides build each site's
  transform once, from the bounds at initialisation, so a bound that depends on another
  parameter is not followed; the NumPyro model samples `beta1_unit` ~ uniform(0, 1) and sets
  `beta1 = beta1_unit * (1 - alpha1)` (a deterministic site), with a factor log(1 - alpha1),
  the Jacobian of that map, so the density over (alpha1, beta1) is Stan's.
- gp_pois_regr-gp_pois_regr: `f = cholesky(K + 1e-10 I) * f_tilde` is built as in Stan, and
  recorded as the deterministic `f` (a Stan transformed parameter).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import ROOT, Problem, load_json

POSTERIORDB = ROOT / "models" / "posteriordb"


def _data(name: str) -> dict:
    return load_json(POSTERIORDB / name / "data.json")


def _f64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


# ---------------------------------------------------------------- data (transformed data too)


def _linear_data(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) for the Gaussian linear models: y ~ normal(X * beta, sigma), X with its
    intercept column, exactly the predictors of the Stan model (transformed data included)."""
    d = _data(name)
    if name == "earnings-earn_height":
        h = _f64(d["height"])
        return np.column_stack([np.ones_like(h), h]), _f64(d["earn"])
    if name == "earnings-log10earn_height":
        h = _f64(d["height"])
        return np.column_stack([np.ones_like(h), h]), np.log10(_f64(d["earn"]))
    if name == "mesquite-logmesquite_logvolume":
        vol = np.log(_f64(d["diam1"]) * _f64(d["diam2"]) * _f64(d["canopy_height"]))
        return np.column_stack([np.ones_like(vol), vol]), np.log(_f64(d["weight"]))
    if name == "kidiq-kidscore_momiq":
        iq = _f64(d["mom_iq"])
        return np.column_stack([np.ones_like(iq), iq]), _f64(d["kid_score"])
    if name == "kidiq-kidscore_interaction":
        iq, hs = _f64(d["mom_iq"]), _f64(d["mom_hs"])
        return np.column_stack([np.ones_like(iq), hs, iq, hs * iq]), _f64(d["kid_score"])
    if name == "nes2000-nes":
        age = np.asarray(d["age_discrete"])
        cols = [
            np.ones(len(age)),
            _f64(d["real_ideo"]),
            _f64(d["race_adj"]),
            (age == 2).astype(np.float64),
            (age == 3).astype(np.float64),
            (age == 4).astype(np.float64),
            _f64(d["educ1"]),
            _f64(d["gender"]),
            _f64(d["income"]),
        ]
        return np.column_stack(cols), _f64(d["partyid7"])
    if name == "sblrc-blr":
        return _f64(d["X"]).reshape(int(d["N"]), int(d["D"])), _f64(d["y"])
    raise KeyError(name)


def _ark_data() -> tuple[np.ndarray, np.ndarray]:
    """(lags, y[K+1:T]) with lags[i, k] = y[t - k] for t = K + 1 .. T, k = 1 .. K (1-based)."""
    d = _data("arK-arK")
    K, T, y = int(d["K"]), int(d["T"]), _f64(d["y"])
    lags = np.column_stack([y[K - k : T - k] for k in range(1, K + 1)])
    return lags, y[K:]


# ------------------------------------------------------------------ the Gaussian linear models
# name -> (prior on beta, prior on sigma): "flat" | ("normal", mu, sd) and
# "flat" | ("halfcauchy", scale) | ("halfnormal", scale)
_LINEAR = {
    "earnings-earn_height": ("flat", "flat"),
    "earnings-log10earn_height": ("flat", "flat"),
    "mesquite-logmesquite_logvolume": ("flat", "flat"),
    "nes2000-nes": ("flat", "flat"),
    "kidiq-kidscore_momiq": ("flat", ("halfcauchy", 2.5)),
    "kidiq-kidscore_interaction": ("flat", ("halfcauchy", 2.5)),
    "sblrc-blr": (("normal", 0.0, 10.0), ("halfnormal", 10.0)),
}


def _linear_pymc(name: str):
    def build():
        import pymc as pm
        import pytensor.tensor as pt

        X, y = _linear_data(name)
        beta_prior, sigma_prior = _LINEAR[name]
        with pm.Model() as model:
            if beta_prior == "flat":
                beta = pm.Flat("beta", shape=X.shape[1])
            else:
                beta = pm.Normal("beta", beta_prior[1], beta_prior[2], shape=X.shape[1])
            if sigma_prior == "flat":
                sigma = pm.HalfFlat("sigma")
            elif sigma_prior[0] == "halfcauchy":
                sigma = pm.HalfCauchy("sigma", beta=sigma_prior[1])
            else:
                sigma = pm.HalfNormal("sigma", sigma=sigma_prior[1])
            pm.Normal("y", mu=pt.dot(pt.as_tensor(X), beta), sigma=sigma, observed=y)
        return model

    return build


def _linear_numpyro(name: str):
    def build():
        import jax.numpy as jnp
        import numpyro
        import numpyro.distributions as dist
        from numpyro.distributions import constraints

        X, y = _linear_data(name)
        beta_prior, sigma_prior = _LINEAR[name]

        def model(X, y):
            D = X.shape[1]
            if beta_prior == "flat":
                beta = numpyro.sample(
                    "beta", dist.ImproperUniform(constraints.real_vector, (), (D,))
                )
            else:
                beta = numpyro.sample(
                    "beta", dist.Normal(beta_prior[1], beta_prior[2]).expand([D]).to_event(1)
                )
            if sigma_prior == "flat":
                sigma = numpyro.sample("sigma", dist.ImproperUniform(constraints.positive, (), ()))
            elif sigma_prior[0] == "halfcauchy":
                sigma = numpyro.sample("sigma", dist.HalfCauchy(sigma_prior[1]))
            else:
                sigma = numpyro.sample("sigma", dist.HalfNormal(sigma_prior[1]))
            with numpyro.plate("N", X.shape[0]):
                numpyro.sample("y", dist.Normal(X @ beta, sigma), obs=y)

        return model, {"X": jnp.asarray(X), "y": jnp.asarray(y)}

    return build


# -------------------------------------------------------------------------- kilpisjarvi


def _kilpisjarvi_pymc():
    import pymc as pm

    d = _data("kilpisjarvi_mod-kilpisjarvi")
    x, y = _f64(d["x"]), _f64(d["y"])
    with pm.Model() as model:
        alpha = pm.Normal("alpha", float(d["pmualpha"]), float(d["psalpha"]))
        beta = pm.Normal("beta", float(d["pmubeta"]), float(d["psbeta"]))
        sigma = pm.HalfFlat("sigma")
        pm.Normal("y", mu=alpha + beta * x, sigma=sigma, observed=y)
    return model


def _kilpisjarvi_numpyro():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    d = _data("kilpisjarvi_mod-kilpisjarvi")
    priors = tuple(float(d[k]) for k in ("pmualpha", "psalpha", "pmubeta", "psbeta"))

    def model(x, y):
        alpha = numpyro.sample("alpha", dist.Normal(priors[0], priors[1]))
        beta = numpyro.sample("beta", dist.Normal(priors[2], priors[3]))
        sigma = numpyro.sample("sigma", dist.ImproperUniform(constraints.positive, (), ()))
        with numpyro.plate("N", x.shape[0]):
            numpyro.sample("y", dist.Normal(alpha + beta * x, sigma), obs=y)

    return model, {"x": jnp.asarray(_f64(d["x"])), "y": jnp.asarray(_f64(d["y"]))}


# -------------------------------------------------------------------------------- arK


def _ark_pymc():
    import pymc as pm
    import pytensor.tensor as pt

    lags, y = _ark_data()
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0, shape=lags.shape[1])
        sigma = pm.HalfCauchy("sigma", beta=2.5)
        pm.Normal("y", mu=alpha + pt.dot(pt.as_tensor(lags), beta), sigma=sigma, observed=y)
    return model


def _ark_numpyro():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    lags, y = _ark_data()

    def model(lags, y):
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([lags.shape[1]]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(2.5))
        with numpyro.plate("T", y.shape[0]):
            numpyro.sample("y", dist.Normal(alpha + lags @ beta, sigma), obs=y)

    return model, {"lags": jnp.asarray(lags), "y": jnp.asarray(y)}


# ------------------------------------------------------------------------------- GARCH(1,1)


def _garch_pymc():
    import pymc as pm
    import pytensor
    import pytensor.tensor as pt

    d = _data("garch-garch11")
    y = _f64(d["y"])
    sigma1 = float(d["sigma1"])
    with pm.Model() as model:
        mu = pm.Flat("mu")
        alpha0 = pm.HalfFlat("alpha0")
        alpha1 = pm.Uniform("alpha1", 0.0, 1.0)
        beta1 = pm.Uniform("beta1", 0.0, 1.0 - alpha1)
        # Stan's beta1 is flat on (0, 1 - alpha1): cancel the uniform's 1 / (1 - alpha1)
        pm.Potential("beta1_flat", pt.log1p(-alpha1))
        # sigma[t]^2 = alpha0 + alpha1 * (y[t-1] - mu)^2 + beta1 * sigma[t-1]^2, t = 2..T
        shocks = alpha0 + alpha1 * pt.square(pt.as_tensor(y[:-1]) - mu)
        var, _ = pytensor.scan(
            lambda c, prev, b: c + b * prev,
            sequences=[shocks],
            outputs_info=[pt.as_tensor(np.float64(sigma1**2))],
            non_sequences=[beta1],
        )
        sigma = pt.concatenate([pt.as_tensor([sigma1]), pt.sqrt(var)])
        pm.Normal("y", mu=mu, sigma=sigma, observed=y)
    return model


def _garch_numpyro():
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    d = _data("garch-garch11")

    def model(y, sigma1):
        mu = numpyro.sample("mu", dist.ImproperUniform(constraints.real, (), ()))
        alpha0 = numpyro.sample("alpha0", dist.ImproperUniform(constraints.positive, (), ()))
        alpha1 = numpyro.sample("alpha1", dist.Uniform(0.0, 1.0))
        # beta1 is flat on (0, 1 - alpha1); autoguides fix a site's bounds at initialisation,
        # so sample it on (0, 1) and scale; log(1 - alpha1) is the Jacobian of the scaling
        unit = numpyro.sample("beta1_unit", dist.Uniform(0.0, 1.0))
        beta1 = numpyro.deterministic("beta1", unit * (1.0 - alpha1))
        numpyro.factor("beta1_flat", jnp.log1p(-alpha1))

        def step(prev, c):
            v = c + beta1 * prev
            return v, v

        shocks = alpha0 + alpha1 * jnp.square(y[:-1] - mu)
        _, var = jax.lax.scan(step, jnp.asarray(sigma1**2, dtype=y.dtype), shocks)
        sigma = jnp.concatenate([jnp.full((1,), sigma1, dtype=y.dtype), jnp.sqrt(var)])
        with numpyro.plate("T", y.shape[0]):
            numpyro.sample("y", dist.Normal(mu, sigma), obs=y)

    return model, {"y": jnp.asarray(_f64(d["y"])), "sigma1": float(d["sigma1"])}


# ------------------------------------------------------------------------ GP Poisson regression


def _gp_data() -> tuple[np.ndarray, np.ndarray]:
    d = _data("gp_pois_regr-gp_pois_regr")
    return _f64(d["x"]), np.asarray(d["k"], dtype=np.int64)


def _gp_pymc():
    import pymc as pm
    import pytensor.tensor as pt

    x, k = _gp_data()
    N = len(x)
    sqdist = np.square(x[:, None] - x[None, :])
    with pm.Model() as model:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", sigma=2.0)
        f_tilde = pm.Normal("f_tilde", 0.0, 1.0, shape=N)
        # gp_exp_quad_cov(x, alpha, rho) + 1e-10 I
        cov = pt.square(alpha) * pt.exp(-0.5 * pt.as_tensor(sqdist) / pt.square(rho))
        cov = cov + 1e-10 * pt.eye(N)
        f = pm.Deterministic("f", pt.dot(pt.linalg.cholesky(cov), f_tilde))
        pm.Poisson("k", mu=pt.exp(f), observed=k)
    return model


def _gp_numpyro():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    x, k = _gp_data()

    def model(x, k):
        N = x.shape[0]
        rho = numpyro.sample("rho", dist.Gamma(25.0, 4.0))
        alpha = numpyro.sample("alpha", dist.HalfNormal(2.0))
        f_tilde = numpyro.sample("f_tilde", dist.Normal(0.0, 1.0).expand([N]).to_event(1))
        sqdist = jnp.square(x[:, None] - x[None, :])
        cov = jnp.square(alpha) * jnp.exp(-0.5 * sqdist / jnp.square(rho)) + 1e-10 * jnp.eye(N)
        f = numpyro.deterministic("f", jnp.linalg.cholesky(cov) @ f_tilde)
        with numpyro.plate("N", N):
            numpyro.sample("k", dist.Poisson(jnp.exp(f)), obs=k)

    return model, {"x": jnp.asarray(x), "k": jnp.asarray(k)}


# ------------------------------------------------------------------------------ the problems

_BUILDERS = {
    "arK-arK": (_ark_pymc, _ark_numpyro),
    "garch-garch11": (_garch_pymc, _garch_numpyro),
    "gp_pois_regr-gp_pois_regr": (_gp_pymc, _gp_numpyro),
    "kilpisjarvi_mod-kilpisjarvi": (_kilpisjarvi_pymc, _kilpisjarvi_numpyro),
    **{name: (_linear_pymc(name), _linear_numpyro(name)) for name in _LINEAR},
}

_NOTES = {
    "garch-garch11": [
        "PyMC: beta1 ~ uniform(0, 1 - alpha1) plus a potential log(1 - alpha1), Stan's flat "
        "density on (0, 1 - alpha1)",
        "NumPyro: beta1 = beta1_unit * (1 - alpha1) is a deterministic site (autoguides fix a "
        "site's bounds at initialisation); a factor log(1 - alpha1) keeps Stan's density",
    ],
    "gp_pois_regr-gp_pois_regr": [
        "f = cholesky(gp_exp_quad_cov(x, alpha, rho) + 1e-10 I) * f_tilde is a deterministic "
        "'f' in both peers",
    ],
}


def _source(ref: dict) -> str:
    src = ref.get("source", {})
    args = src.get("reference_method_arguments", {})
    return (
        f"posteriordb reference draws: {ref.get('n_chains', 10)} chains x "
        f"{ref.get('draws_per_chain', 1000)} NUTS draws (Stan, iter {args.get('iter', '?')}, "
        f"thin {args.get('thin', '?')}; posteriordb {str(src.get('commit', '?'))[:7]})"
    )


def _problem(folder: Path) -> Problem:
    name = folder.name
    ref = load_json(folder / "reference.json")
    pymc_model, numpyro_model = _BUILDERS[name]
    return Problem(
        name=name,
        model=folder / "model.stan",
        data=[folder / "data.json"],
        reference=ref["parameters"],
        reference_source=_source(ref),
        pymc_model=pymc_model,
        numpyro_model=numpyro_model,
        notes=list(_NOTES.get(name, [])),
    )


PROBLEMS: list[Problem] = [
    _problem(folder)
    for folder in sorted(POSTERIORDB.iterdir())
    if (folder / "reference.json").exists() and folder.name in _BUILDERS
]
