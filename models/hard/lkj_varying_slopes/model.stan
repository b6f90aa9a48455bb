// Correlated varying intercepts and slopes, non-centred: ab = (diag(tau) L z)'.
data {
  int<lower=1> N;
  int<lower=1> J;
  array[N] int<lower=1, upper=J> g;
  vector[N] x;
  vector[N] y;
}
parameters {
  vector[2] mu;
  vector<lower=0>[2] tau;
  cholesky_factor_corr[2] L;
  matrix[2, J] z;
  real<lower=0> sigma;
}
transformed parameters {
  matrix[J, 2] ab = (diag_pre_multiply(tau, L) * z)';
}
model {
  mu ~ normal(0, 5);
  tau ~ normal(0, 2.5);
  L ~ lkj_corr_cholesky(2);
  to_vector(z) ~ std_normal();
  sigma ~ normal(0, 2.5);
  y ~ normal(mu[1] + ab[g, 1] + (mu[2] + ab[g, 2]) .* x, sigma);
}
