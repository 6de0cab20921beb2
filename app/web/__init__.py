"""The web UI: server-rendered pages over the same services as the API.

- ``router``: the overview, the pipeline page, the what-if fragment, help, docs; the
  other pages are routers of their own: ``review``, ``runs_page``, ``settings``,
  ``alerts_page``.
- ``views``, ``value_view``: what each page shows, gathered from the services (no HTML,
  no SQL); ``decision``: the decision card's sentence (pure).
- ``figures*``: pure builders of Plotly figure dicts; ``sparkline``: inline SVG lines.

The one Jinja2 environment, its filters and the error page are ``app.templating``.
"""
