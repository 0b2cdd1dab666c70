"""Online policies, acting through the Environment protocol (never importing sim or runtime)."""
