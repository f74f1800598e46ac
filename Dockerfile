# The Suli query service (`suli serve`), as started by docker-compose.yml.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml README.md ./
COPY suli ./suli
COPY app ./app
COPY cli ./cli
COPY indexer ./indexer
COPY devcluster ./devcluster
COPY mappings ./mappings
RUN pip install .

RUN useradd --create-home --uid 10001 suli
USER suli

EXPOSE 8000
# Healthy means ready to search: /readyz answers 200 only while the backend answers (a 503
# from it raises here); /healthz would only say the process is alive.
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=5)"]
CMD ["suli", "serve", "--host", "0.0.0.0", "--port", "8000"]
