"""visible-devices-bypass: a container that requests no GPU must not set NVIDIA_VISIBLE_DEVICES
to devices (`all`, indexes, UUIDs): on a node whose default runtime is NVIDIA's it would use
GPUs that the device plugin gave to other pods. Ephemeral (debug) containers too.

FAIL: no GPU resource and env `NVIDIA_VISIBLE_DEVICES=all`
PASS: `NVIDIA_VISIBLE_DEVICES=none`; a container that requests `nvidia.com/gpu` or lists a
  GPU ResourceClaim in `resources.claims`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.dra.demand import by_name, claims_gpu
from policies.model import GPUPolicy
from policies.view import PodView

ID = "visible-devices-bypass"
INTRINSIC = False

EXAMPLES = """
- FAIL: a sidecar that asks for no GPU but sets NVIDIA_VISIBLE_DEVICES=all
  policy: {rules: {denyVisibleDevicesBypass: true}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: sidecar}
    spec:
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]
- PASS: the same container with NVIDIA_VISIBLE_DEVICES=none
  policy: {rules: {denyVisibleDevicesBypass: true}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: sidecar}
    spec:
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        env: [{name: NVIDIA_VISIBLE_DEVICES, value: none}]
"""
NATIVE = ""
NAME = "NVIDIA_VISIBLE_DEVICES"
NO_DEVICES = frozenset({"none", "void", ""})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if not policy.spec.rules.deny_visible_devices_bypass:
        return
    named = by_name(view.demand.claims)
    for container in view.demand.containers:
        if container.gpu or claims_gpu(container.spec, named):
            continue
        env = container.spec.get("env")
        for index, var in enumerate(env if isinstance(env, list) else ()):
            if not isinstance(var, dict) or var.get("name") != NAME or "value" not in var:
                continue
            raw = var.get("value")
            value = raw if isinstance(raw, str) else "" if raw is None else shown(raw)
            if value.strip().lower() not in NO_DEVICES:
                yield Finding(
                    ID, f"container {shown(container.name)} requests no GPU but sets "
                    f"{NAME}={value}: request a GPU resource or set it to none",
                    (*container.path, "env", index, "value"),
                )
