"""The real runtime: the Environment protocol on Dask distributed (pools, store, volatility)."""
