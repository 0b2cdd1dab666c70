"""Readers and generators of workloads and availability: real formats in, model objects out."""
