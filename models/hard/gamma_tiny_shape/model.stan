// A gamma with a tiny shape and no data: almost all mass near 0, a long right tail.
parameters {
  real<lower=0> lambda;
}
model {
  lambda ~ gamma(0.01, 1.01);
}
