"""The directory the gunicorn workers share with each other and with the master: Prometheus
samples (prometheus_client's multiprocess mode) and each worker's readiness file. Below both
metrics.py and metrics_port.py, and free of prometheus_client, which reads the variable when
first imported (serve sets it before any worker imports it)."""

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
READY_PREFIX = "ready-"  # ready-<pid>.json, one per live worker
