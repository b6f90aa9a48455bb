// Conjugate: a normal mean with known sigma and a normal prior.
data {
  int<lower=0> N;
  vector[N] y;
  real<lower=0> sigma;
}
parameters {
  real mu;
}
model {
  mu ~ normal(0, 10);
  y ~ normal(mu, sigma);
}
