"""The web UI: server-rendered pages over the same services as the API.

- ``router``: the page routes (overview, pipeline, what-if fragment, review, help, docs,
  vendored browser files); parses the query and renders a template.
- ``views``: what each page shows, gathered from the services (no HTML, no SQL).
- ``figures*``: pure builders of Plotly figure dicts.
- ``templating``: the one Jinja2 environment, its filters and the error page.
"""
