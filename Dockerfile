# syntax=docker/dockerfile:1
# The gpupolicy webhook image: `gpupolicy serve` (Flask under gunicorn, TLS) as a non-root user.
#   docker build -t gpupolicy:dev .
#   docker run --rm -p 8443:8443 gpupolicy:dev          # self-signed pair in /tmp/certs
# In a cluster the Helm chart (charts/gpupolicy) mounts the certificates and the policies.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Build stage: install the package and its dependencies into a venv. Every dependency ships a
# manylinux wheel (cryptography, pydantic-core, PyYAML), so no compiler is needed here either.
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY policies ./policies
COPY webhook ./webhook
RUN python -m venv /opt/gpupolicy \
 && /opt/gpupolicy/bin/pip install --prefer-binary -c constraints.txt . \
 && /opt/gpupolicy/bin/pip uninstall --yes pip \
 && find /opt/gpupolicy -name '__pycache__' -prune -exec rm -rf {} +

# Final stage: the venv only (same path, so its scripts keep working); no pip, no sources.
FROM ${PYTHON_IMAGE}
COPY --from=build /opt/gpupolicy /opt/gpupolicy
RUN groupadd --system --gid 10001 gpupolicy \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gpupolicy \
 && rm -rf /usr/local/lib/python3.*/ensurepip /usr/local/bin/pip*
ENV PATH=/opt/gpupolicy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric user, so runAsNonRoot can verify it; the root filesystem can be read-only (the
# server writes only under /tmp: gunicorn heartbeats, Prometheus multiprocess files).
USER 10001:10001
WORKDIR /tmp
EXPOSE 8443
# Liveness over HTTPS; the certificate may be self-signed, so only the answer is checked.
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import ssl, sys, urllib.request; ctx = ssl._create_unverified_context(); sys.exit(0 if urllib.request.urlopen('https://127.0.0.1:8443/healthz', context=ctx, timeout=2).status == 200 else 1)"]
# `gpupolicy serve` runs gunicorn (gthread workers) in process: the entrypoint is the server.
ENTRYPOINT ["gpupolicy"]
CMD ["serve", "--port=8443", "--certs-dir=/tmp/certs"]
