"""Pure offline planners: task mapping (ETC heuristics), provisioning (ILP), VM placement."""
