"""Whether a cluster is in play: a kubeconfig given, or a pod's in-cluster config. Asked
before the `kubernetes` package is imported, so that a run without a cluster never loads it."""

from __future__ import annotations

import argparse
import os


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def wanted(args: argparse.Namespace) -> bool:
    """`serve`: watch a cluster (`--kubeconfig`, or in a pod without it)."""
    return bool(getattr(args, "kubeconfig", None)) or in_cluster()
