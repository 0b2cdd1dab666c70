"""Discrete-event simulation: the event kernel and simulated environments."""
