"""The weekly goodput review: one line per pipeline, totals, top actions (``lines``:
pure; ``service``: where the numbers come from). The page (``app.web.review``) and the
weekly digest alert (``app.alerts``) both show it."""
