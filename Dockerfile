FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /srv/cadence
COPY pyproject.toml README.md alembic.ini ./
COPY clients/python ./clients/python
COPY app ./app
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
# Editable: templates/, static/ and migrations/ live beside app/, not inside it.
# The client distribution from this tree first (cadence-gpu-client: the `cadence` script;
# the server declares it and adds its commands to it). It is not on the package index.
RUN pip install --no-cache-dir ./clients/python && pip install --no-cache-dir -e . \
  && useradd --system cadence
USER cadence
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=5 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/readyz').status != 200)"
# Migrations are applied before the app serves; `serve` refuses an outdated schema.
CMD ["sh", "-c", "cadence migrate && cadence serve"]
