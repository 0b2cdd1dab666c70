"""The real runtime: the Environment protocol on real workers (local processes, a Dask cluster or
Slurm jobs: pools, store, volatility), and the lease manager and SpeQuloS service on a real clock."""
