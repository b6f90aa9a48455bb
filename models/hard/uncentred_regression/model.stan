// A linear regression with an uncentred predictor and known sigma: a and b strongly correlated.
data {
  int<lower=0> N;
  vector[N] x;
  vector[N] y;
}
parameters {
  real a;
  real b;
}
model {
  a ~ normal(0, 10);
  b ~ normal(0, 10);
  y ~ normal(a + b * x, 1);
}
