"""Campaigns: parameter sweeps on Dask, reproductions of the papers, reports."""
