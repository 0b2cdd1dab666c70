"""ILP provisioning: instance types, how many, where and when, for min cost under a deadline."""
