"""``--engine dask``: the log joint's row terms computed where the data lives, on Dask workers.

The data rows, a glob of CSV or Parquet files, are read as a Dask DataFrame, one partition per
file; each partition is checked and turned into the model's data arrays on the worker that
read it, and stays there (partitions.py). Only draws and sums travel (gradient.py):

- By default (`--method auto`) every pass sums every row: the driver sends the S draws zeta
  (S x D) of q (and, for a Hessian-vector product, S vectors), each worker returns per partition
  the S sums of its rows' log-likelihood terms with their S x D gradients (or products), and
  the driver adds them in partition order with the prior and log-Jacobian terms it evaluates
  itself. The default road (L-BFGS on the ELBO over fixed draws, its PSIS check) runs on that
  full-data log joint, so the fit is the in-memory fit of the same rows (FullDataLogJoint).
- With `--method dsvi --batch B`, every gradient step each worker draws, for each of its
  partitions p, b_p = max(1, round(B n_p / N)) of its n_p rows, with a generator seeded by
  (seed, step, p), and returns those rows' sums times n_p / b_p with their gradients: added in
  partition order to the driver's prior and log-Jacobian terms, an unbiased estimate of the
  full-data log joint and its gradient (stratified sampling; DistributedLogJoint). The ELBO is
  then estimated on the driver, on a fixed uniform sample of rows gathered once.

Per pass: 8 S D bytes (plus Dask's few hundred bytes per task) to each worker, 8 S (D + 1) bytes
per partition back. Sums in partition order do not depend on which worker held what. Faults are
Dask's: a partition lost with its worker is recomputed from its file by another worker (the
futures keep their lineage), and the pass's task is resubmitted.
"""
