// Conjugate: a binomial probability with a beta prior.
data {
  int<lower=0> N;
  array[N] int<lower=0> n;
  array[N] int<lower=0> k;
}
parameters {
  real<lower=0, upper=1> theta;
}
model {
  theta ~ beta(2, 2);
  k ~ binomial(n, theta);
}
