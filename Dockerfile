# The barnabas image: the package with its coordination drivers (barnabas[backends]) and the
# `barnabas` command, nothing else of the repository. Build: docker build -t barnabas:0.1.0 .
# Python 3.11: the version the test suite runs on.

FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/barnabas
WORKDIR /src
# What the wheel is built from, only (.dockerignore keeps the rest out of the context).
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/barnabas/bin/pip install --no-cache-dir ".[backends]"

FROM python:3.11-slim-bookworm
LABEL org.opencontainers.image.title="barnabas" \
      org.opencontainers.image.description="A Kafka-wire-compatible, replicated message broker in Python" \
      org.opencontainers.image.licenses="Apache-2.0"
# A fixed uid (10001) and no home or shell: the Kubernetes manifests run as it (runAsUser). It owns
# /var/lib/barnabas, where a broker started by `docker run` keeps its log dir.
RUN groupadd --system --gid 10001 barnabas \
    && useradd --system --no-log-init --uid 10001 --gid barnabas --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin barnabas \
    && install -d -o barnabas -g barnabas /var/lib/barnabas
COPY --from=build /opt/barnabas /opt/barnabas
ENV PATH=/opt/barnabas/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 10001:10001
WORKDIR /var/lib/barnabas
# 9092: Kafka clients (listeners); 9644: /healthz, /readyz, /metrics (admin.listeners).
EXPOSE 9092 9644
# The broker and the proxy stop cleanly on SIGTERM, which reaches them as PID 1 (exec form). The
# default command is one broker for `docker run -p 9092:9092 barnabas:0.1.0`, advertised at
# 127.0.0.1:9092; the Kubernetes manifests give their own commands.
ENTRYPOINT ["barnabas"]
CMD ["broker", "--listen", "0.0.0.0:9092", "--advertise", "127.0.0.1:9092", "--data-dir", "/var/lib/barnabas/data"]
