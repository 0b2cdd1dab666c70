"""The dashboard of `skylease serve` (issue 21): server-rendered pages behind a login session."""
