"""Long-lived services: `skylease serve` (the HTTP API of leases, SpeQuloS and runs)."""
