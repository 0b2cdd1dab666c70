"""Runs of ``skylease run`` reported to a service (issue 21): its registry and the run's reporter."""
