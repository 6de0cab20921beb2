"""Dashboard helpers: pure builders of Plotly figure dicts (see :mod:`app.dashboard.figures`)."""
