// An equal two-component mixture with modes at -10 and 10.
parameters {
  real x;
}
model {
  target += log_mix(0.5, normal_lpdf(x | -10, 1), normal_lpdf(x | 10, 1));
}
