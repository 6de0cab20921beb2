"""`cadence report` and `cadence export`: move run records between files and a server."""
