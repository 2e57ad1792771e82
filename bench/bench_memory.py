"""Peak memory of `gpupolicy serve` under hostile bodies: the chart's defaults (workers and
threads, 2 of 4), over loopback TLS, a client for every thread of every worker (8) sending the
costliest bodies the limits let through, one shape per round:

- `empty objects`: `[{},{},…]` up to the byte limit, ~36x its size once parsed: refused by the
  value count (413) before anything is built;
- `short strings`: a valid review whose object holds distinct short strings up to the value
  budget (the dearest values: ~170 bytes each once parsed), judged;
- `GPU containers`: a valid Pod with as many GPU containers as the value budget holds, judged
  (the engine's work, not only the parser's).

The figure is the sum of the peak resident memory (VmHWM) of the master and every worker: an
upper bound of what the pod's cgroup is charged (pages shared after fork count once per
process here, and each process's peak counts whenever it happened). It must stay below the
chart's memory limit (charts/gpupolicy/values.yaml); tests/server/test_memory.py holds it to
that. main() returns 1 when it does not.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import yaml

from webhook.http import admission

ROOT = Path(__file__).resolve().parent.parent
VALUES = ROOT / "charts" / "gpupolicy" / "values.yaml"
_CHART = yaml.safe_load(VALUES.read_text(encoding="utf-8"))
WORKERS, THREADS = int(_CHART["workers"]), int(_CHART["threads"])  # the chart's: 2 and 4
CLIENTS = WORKERS * THREADS  # every thread of every worker busy
SNI = "gpupolicy.gpupolicy.svc"
GPUPOLICY = [sys.executable, "-c",
             "import sys; from webhook.cli import main; sys.argv[0] = 'gpupolicy'; main()", "serve"]


def _review(obj: object) -> dict[str, object]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "hostile", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE", "namespace": "default", "userInfo": {"username": "attacker"},
        "object": obj, "oldObject": None, "dryRun": False, "options": None}}


def _pod(spec: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "hostile", "namespace": "default"}, "spec": spec}


def empty_objects(limit: int = admission.MAX_BODY) -> bytes:
    head, tail = b'{"pad":[', b"{}]}"
    return head + b"{}," * ((limit - len(head) - len(tail)) // 3) + tail


def short_strings(values: int = admission.MAX_VALUES, limit: int = admission.MAX_BODY
                  ) -> bytes:
    # as many distinct strings as both budgets allow: `"000123",` is width + 3 bytes
    width = max(len(str(values)), limit // values - 3)
    count = min(values - 64, (limit - 512) // (width + 3))
    return orjson.dumps(_review(_pod({
        "containers": [{"name": "c", "image": "i"}],
        "pad": [f"{i:0{width}d}" for i in range(count)]})))


def gpu_containers(values: int = admission.MAX_VALUES) -> bytes:
    # name, image, resources, limits, the GPU: 5 keys and their values, and the container
    per_container = 11
    return orjson.dumps(_review(_pod({"containers": [
        {"name": f"c{i}", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "3"}}}
        for i in range((values - 64) // per_container)]})))


SHAPES: dict[str, Callable[[], bytes]] = {
    "empty objects": empty_objects, "short strings": short_strings,
    "GPU containers": gpu_containers,
}


def chart_memory_mib(which: str = "limits") -> float:
    """The chart's default memory `limits` (or `requests`) of the webhook container."""
    given = str(_CHART["resources"][which]["memory"])
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", given).groups()  # type: ignore[union-attr]
    return float(number) * (1024 if unit == "Gi" else 1)


def _kib(pid: int, key: str) -> int:
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    found = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
    return int(found.group(1)) if found else 0


def children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def peak_mib(master: int) -> dict[int, float]:
    """VmHWM of the master and each of its workers, in MiB."""
    return {pid: _kib(pid, "VmHWM") / 1024 for pid in [master, *children(master)]}


@dataclass
class Flood:
    statuses: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


def _post(port: int, context: ssl.SSLContext, body: bytes) -> int:
    conn = http.client.HTTPSConnection(SNI, port, context=context, timeout=60)
    conn.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), 60),
                                    server_hostname=SNI)
    try:
        conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return 0  # reset or closed without an answer
    finally:
        conn.close()


def flood(port: int, ca: Path, shapes: Iterable[str] = SHAPES) -> Flood:
    """CLIENTS requests at once of each shape, one shape after another."""
    context = ssl.create_default_context(cafile=str(ca))
    out = Flood()
    for name in shapes:
        body = SHAPES[name]()
        got: list[int] = []

        def send(body: bytes = body, got: list[int] = got) -> None:
            got.append(_post(port, context, body))

        threads = [threading.Thread(target=send) for _ in range(CLIENTS)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out.statuses[name], out.seconds[name] = sorted(got), time.monotonic() - started
    return out


def start(work: Path, args: Iterable[str] = ()) -> tuple[subprocess.Popen[bytes], int, Path]:
    """`gpupolicy serve` with the chart's workers and threads and a self-signed pair."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = work / "server.log"
    proc = subprocess.Popen(
        [*GPUPOLICY, "--host", "127.0.0.1", "--port", str(port), "--metrics-port", "0",
         "--workers", str(WORKERS), "--threads", str(THREADS), "--certs-dir", str(work / "certs"),
         *args],
        cwd=work, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    ca = work / "certs" / "ca.crt"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {log.read_text()[-2000:]}")
        if ca.exists() and len(children(proc.pid)) == WORKERS:
            try:
                context = ssl.create_default_context(cafile=str(ca))
                conn = http.client.HTTPSConnection(SNI, port, context=context, timeout=5)
                conn.sock = context.wrap_socket(
                    socket.create_connection(("127.0.0.1", port), 5), server_hostname=SNI)
                conn.request("GET", "/readyz")
                if conn.getresponse().status == 200:
                    conn.close()
                    return proc, port, ca
                conn.close()
            except (OSError, http.client.HTTPException):
                pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not become ready in 60 s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def main() -> int:
    limit, request = chart_memory_mib("limits"), chart_memory_mib("requests")
    with tempfile.TemporaryDirectory(prefix="gpupolicy-bench-memory-") as tmp:
        proc, port, ca = start(Path(tmp))
        try:
            idle = sum(peak_mib(proc.pid).values())
            result = flood(port, ca)
            peaks = peak_mib(proc.pid)
        finally:
            stop(proc)
    total = sum(peaks.values())
    print(f"{CLIENTS} concurrent bodies of at most {admission.MAX_BODY} bytes and "
          f"{admission.MAX_VALUES} JSON values, over TLS, {WORKERS} workers x {THREADS} threads")
    for name in SHAPES:
        counts = {s: result.statuses[name].count(s) for s in sorted(set(result.statuses[name]))}
        print(f"  {name:<16} answers {counts}  in {result.seconds[name]:.1f} s")
    print(f"peak memory (VmHWM, master + workers): {total:.0f} MiB "
          f"({', '.join(f'{p:.0f}' for p in peaks.values())}); idle {idle:.0f} MiB; "
          f"chart request {request:.0f} MiB ({total / request:.0%} of it), "
          f"limit {limit:.0f} MiB ({total / limit:.0%})")
    return 0 if total < limit else 1


if __name__ == "__main__":
    sys.exit(main())
