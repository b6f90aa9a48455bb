// Neal's funnel in 10 dimensions: the scale of x is exp(v / 2).
parameters {
  real v;
  vector[9] x;
}
model {
  v ~ normal(0, 3);
  x ~ normal(0, exp(v / 2));
}
