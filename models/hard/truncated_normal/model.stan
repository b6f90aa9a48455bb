// A normal observed only above L: (mu, sigma) strongly correlated and curved.
data {
  int<lower=0> N;
  real L;
  array[N] real<lower=L> y;
}
parameters {
  real mu;
  real<lower=0> sigma;
}
model {
  mu ~ normal(0, 5);
  sigma ~ normal(0, 5);
  for (n in 1:N)
    y[n] ~ normal(mu, sigma) T[L, ];
}
