"""GPU utilisation from Prometheus (DCGM Exporter's series), for `audit --pools --prometheus`.

Plain HTTP through urllib: two GETs of Prometheus' documented JSON API
(/api/v1/query_range and /api/v1/query) need no client library, and the ones on PyPI bring
pandas/numpy or an async stack for what is two requests. The queries and the reading of the
answers are the core's (policies/pools/utilization.py): a fixed number of queries per run
(two), whatever the number of nodes.

Whatever goes wrong (refused, slow, not JSON, an error status, a proxy's HTML page) comes
back as a Utilization marked unavailable with the reason; `answered` says whether Prometheus
answered at all, for the audit's exit 2 when it was asked for and never did.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from policies.pools.utilization import ParseError, Utilization, parse, queries, step_for

MAX_ANSWER = 256 * 1024 * 1024  # bytes read from one answer at most


@dataclass
class Fetched:
    utilization: Utilization
    answered: bool  # Prometheus sent an HTTP answer to at least one query


class _Failed(Exception):
    def __init__(self, reason: str, answered: bool) -> None:
        super().__init__(reason)
        self.answered = answered


def fetch(url: str, window: float, *, now: float | None = None, token: str = "",
          ca_file: str | None = None, timeout: float = 30.0) -> Fetched:
    now = time.time() if now is None else now
    base = url.rstrip("/")
    context = ssl.create_default_context(cafile=ca_file) if base.startswith("https") else None
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    exprs = queries(window)
    step = step_for(window)
    first = False
    try:
        nodes_answer = _get(
            f"{base}/api/v1/query_range", {"query": exprs["nodes"], "start": f"{now - window:.3f}",
                                           "end": f"{now:.3f}", "step": str(step)},
            headers, context, timeout)
        first = True
        gpus_answer = _get(f"{base}/api/v1/query", {"query": exprs["gpus"],
                                                    "time": f"{now:.3f}"},
                           headers, context, timeout)
        util = parse(window, nodes_answer, gpus_answer)
    except _Failed as exc:
        return Fetched(Utilization(window, unavailable=str(exc)), exc.answered or first)
    except ParseError as exc:
        return Fetched(Utilization(window, unavailable=str(exc)), True)
    if not util.node_series:
        util.unavailable = (f"Prometheus at {base} holds no DCGM utilisation series "
                            "(DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_GPU_UTIL_RATIO, "
                            "DCGM_FI_PROF_GR_ENGINE_ACTIVE) over the window")
    return Fetched(util, True)


def _get(url: str, params: dict[str, str], headers: dict[str, str],
         context: ssl.SSLContext | None, timeout: float) -> Any:
    request = urllib.request.Request(f"{url}?{urllib.parse.urlencode(params)}",
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
            body = resp.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as exc:
        # Prometheus answers 400/422/503 with its JSON error body: read what it says
        try:
            detail = json.loads(exc.read(65536) or b"{}").get("error", "")
        except (ValueError, AttributeError, OSError):
            detail = ""
        raise _Failed(f"Prometheus answered HTTP {exc.code}"
                      + (f": {str(detail)[:200]}" if detail else ""), True) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Failed(f"Prometheus at {url.rsplit('/api/', 1)[0]} did not answer: "
                      f"{str(reason)[:200]}", False) from None
    if len(body) > MAX_ANSWER:
        raise ParseError(f"Prometheus' answer is over {MAX_ANSWER // 2**20} MiB")
    try:
        return json.loads(body)
    except ValueError:
        raise ParseError("Prometheus' answer is not JSON") from None
