"""The one error a cluster read raises, kept apart from the client so that commands which
read only files can catch it without loading the `kubernetes` package."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """The API server could not be reached or refused us; the message says which and why."""
