# syntax=docker/dockerfile:1
# The gpupolicy webhook image: `gpupolicy serve` (Flask under gunicorn, TLS) as a non-root user.
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@$digest -t gpupolicy:X .
#   docker run --rm -p 8443:8443 -p 9090:9090 gpupolicy:X   # self-signed pair in /tmp/certs
# In a cluster the Helm chart (charts/gpupolicy) mounts the certificates and the policies.
#
# The base image is pinned by digest, so a rebuilt tag upstream cannot change what ships; the
# build refuses a tag alone (tools/pinned_base.sh) unless ALLOW_UNPINNED_BASE=1 is given, for a
# development build. The default below is a tag only because this repository cannot look
# digests up:
#   digest=$(docker buildx imagetools inspect python:3.11-slim-bookworm \
#            --format '{{json .Manifest.Digest}}' | tr -d '"')
#   docker build --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@$digest -t gpupolicy:X .
#   docker build --build-arg ALLOW_UNPINNED_BASE=1 -t gpupolicy:dev .   # development only
# The reference used ends up in the image's org.opencontainers.image.base.name label.
#
# Every Python package comes from requirements.lock: exact versions with their hashes
# (`pip install --require-hashes`: a file whose hash is not listed is refused, and nothing
# unlisted can be pulled in). tools/sbom.py writes the CycloneDX SBOM of exactly that set.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# Build stage: install the locked dependencies and the package into a venv. Every dependency
# ships a manylinux wheel (cryptography, pydantic-core, PyYAML), so no compiler is needed and
# none is allowed (--only-binary); setuptools, locked too, builds the package itself and is
# removed afterwards with pip.
FROM ${PYTHON_IMAGE} AS build
ARG PYTHON_IMAGE
ARG ALLOW_UNPINNED_BASE=0
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1
WORKDIR /src
COPY tools/pinned_base.sh /usr/local/bin/pinned_base.sh
RUN sh /usr/local/bin/pinned_base.sh "$PYTHON_IMAGE" "$ALLOW_UNPINNED_BASE"
COPY pyproject.toml README.md requirements.lock ./
COPY policies ./policies
COPY webhook ./webhook
RUN python -m venv /opt/gpupolicy \
 && /opt/gpupolicy/bin/pip install --require-hashes --only-binary=:all: --no-deps \
      -r requirements.lock \
 && /opt/gpupolicy/bin/pip install --no-deps --no-index --no-build-isolation . \
 && /opt/gpupolicy/bin/pip uninstall --yes setuptools pip \
 && find /opt/gpupolicy -name '__pycache__' -prune -exec rm -rf {} +

# Final stage: the venv only (same path, so its scripts keep working); no pip, no sources.
FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
LABEL org.opencontainers.image.title="gpupolicy" \
      org.opencontainers.image.description="GPU-aware Kubernetes admission webhook" \
      org.opencontainers.image.source="https://github.com/gpupolicy/gpupolicy" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
COPY --from=build /opt/gpupolicy /opt/gpupolicy
# A system user with no home and no shell; no setuid/setgid binaries left for it to use (the
# chart also forbids privilege escalation); no pip, so nothing can be installed at run time.
RUN groupadd --system --gid 10001 gpupolicy \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin gpupolicy \
 && rm -rf /usr/local/lib/python3.*/ensurepip /usr/local/bin/pip* \
 && find / -xdev -type f -perm /6000 -exec chmod a-s {} + \
 && chown -R root:root /opt/gpupolicy && chmod -R go-w /opt/gpupolicy
ENV PATH=/opt/gpupolicy/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric user, so runAsNonRoot can verify it; the root filesystem can be read-only (the
# server writes only under /tmp: gunicorn heartbeats, Prometheus multiprocess files).
USER 10001:10001
WORKDIR /tmp
# 8443: admissions over TLS. 9090: plain HTTP for /metrics, /healthz and /readyz.
EXPOSE 8443 9090
# gunicorn finishes in-flight requests on SIGTERM (graceful timeout 10 s).
STOPSIGNAL SIGTERM
# Liveness on the plain-HTTP listener: no certificate to skip checking.
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:9090/healthz', timeout=2).status == 200 else 1)"]
# `gpupolicy serve` runs gunicorn (gthread workers) in process: the entrypoint is the server.
ENTRYPOINT ["gpupolicy"]
CMD ["serve", "--port=8443", "--metrics-port=9090", "--certs-dir=/tmp/certs"]
