"""`cadence export --format focus` (focus.py): registered as a `cadence.export_formats`
entry point; the other pipeline commands live in the client (`cadence_client.commands`)."""
