"""The problems of benchmarks/peers.py: posteriordb posteriors, logistic regression on real
data, GPFA and a Poisson-gamma hierarchical model, each stated for ppl, PyMC and NumPyro."""
