// A multivariate normal with unknown mean, scales and an LKJ prior on the correlation.
data {
  int<lower=1> N;
  int<lower=1> K;
  array[N] vector[K] y;
}
parameters {
  vector[K] mu;
  vector<lower=0>[K] sigma;
  cholesky_factor_corr[K] L;
}
model {
  mu ~ normal(0, 10);
  sigma ~ normal(0, 5);
  L ~ lkj_corr_cholesky(2);
  y ~ multi_normal_cholesky(mu, diag_pre_multiply(sigma, L));
}
