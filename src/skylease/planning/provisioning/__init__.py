"""ILP provisioning: instance types, how many, where and when, for min cost under a deadline."""

from .catalog import CloudType, load_catalog, pick
from .mapreduce import MapReduceJob, solve_mapreduce
from .plan import Plan
from .watershed import WatershedJob, solve_watershed

__all__ = ["CloudType", "MapReduceJob", "Plan", "WatershedJob", "load_catalog", "pick", "solve_mapreduce",
           "solve_watershed"]
