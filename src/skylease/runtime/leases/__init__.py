"""The lease manager on a real clock (issue 19): the same scheduler as the simulator, a journal in
the database, and an enactment that runs leases on this machine's nodes."""
