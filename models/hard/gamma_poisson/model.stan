// Conjugate: a Poisson rate with a gamma prior.
data {
  int<lower=0> N;
  array[N] int<lower=0> y;
}
parameters {
  real<lower=0> lambda;
}
model {
  lambda ~ gamma(2, 0.5);
  y ~ poisson(lambda);
}
