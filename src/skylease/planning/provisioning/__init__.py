"""ILP provisioning: instance types, how many, where and when, for min cost under a deadline."""

from .catalog import CloudType, load_catalog, pick
from .mapreduce import MapReduceJob, solve_mapreduce
from .multimodel import SCENARIO_A, SCENARIO_B, WatershedModel, solve_multimodel
from .plan import Plan
from .watershed import WatershedJob, solve_watershed

__all__ = ["SCENARIO_A", "SCENARIO_B", "CloudType", "MapReduceJob", "Plan", "WatershedJob", "WatershedModel",
           "load_catalog", "pick", "solve_mapreduce", "solve_multimodel", "solve_watershed"]
