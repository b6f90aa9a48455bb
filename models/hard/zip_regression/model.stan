// Zero-inflated Poisson regression.
data {
  int<lower=0> N;
  int<lower=1> K;
  matrix[N, K] X;
  array[N] int<lower=0> y;
}
parameters {
  real alpha;
  vector[K] beta;
  real<lower=0, upper=1> theta;
}
model {
  vector[N] eta = alpha + X * beta;
  alpha ~ normal(0, 2);
  beta ~ normal(0, 1);
  theta ~ beta(1, 1);
  for (n in 1:N) {
    if (y[n] == 0) {
      target += log_sum_exp(log(theta), log1m(theta) + poisson_log_lpmf(0 | eta[n]));
    } else {
      target += log1m(theta) + poisson_log_lpmf(y[n] | eta[n]);
    }
  }
}
