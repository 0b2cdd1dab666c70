"""SpeQuloS as a service (issue 20): the Credit System, the Information module and the Oracle on a
database, and the Scheduler that drives runs."""
