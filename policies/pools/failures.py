"""Why a GPU pod fails, told apart as the operator must (operator-guide §1 indicator 3, §3):
GPU out-of-memory, driver or device errors, image problems and ordinary resource shortage are
different things, and sharing is not to blame for all of them.

One cause per pod, the most specific first: a pod that was OOMKilled and then crash-looped is
a host OOM. GPU out-of-memory is said only where a termination message says so (the kubelet
cannot tell it from any other crash).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

CAUSES = ("capacity", "image", "host-oom", "device", "gpu-oom", "other")
# Causes neighbours on one node bring about: memory the host or the card runs out of, pods
# evicted for another's use. Image and device errors are the pod's or the node's own.
NEIGHBOUR_CAUSES = frozenset({"host-oom", "gpu-oom", "capacity"})
IMAGE_REASONS = frozenset({"ImagePullBackOff", "ErrImagePull", "InvalidImageName",
                           "ErrImageNeverPull", "RegistryUnavailable"})
# status.reason of a pod the kubelet refused at admission: a device plugin's Allocate failed
DEVICE_REASONS = frozenset({"UnexpectedAdmissionError"})
WAITING_FAILURES = IMAGE_REASONS | {"CrashLoopBackOff", "CreateContainerError",
                                    "RunContainerError", "CreateContainerConfigError"}
GPU_OOM_WORDS = ("cuda out of memory", "cuda_error_out_of_memory", "cudaerrormemoryallocation",
                 "outofmemoryerror: cuda", "cublas_status_alloc_failed")
DEVICE_WORDS = ("xid", "nvml", "cuda driver version is insufficient", "nvidia-container-cli",
                "no cuda-capable device", "cuda_error_no_device", "gpu is lost",
                "uncorrectable ecc", "cudaerrordevicesunavailable",
                "driver/library version mismatch")
MESSAGE = 4096  # a termination message is at most 4096 bytes (kubelet's own limit)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _states(status: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every container's state and last state (init containers included)."""
    for key in ("initContainerStatuses", "containerStatuses"):
        listed = status.get(key)
        for cs in listed[:1000] if isinstance(listed, list) else ():
            cs = _mapping(cs)
            yield _mapping(cs.get("state"))
            yield _mapping(cs.get("lastState"))


def cause(pod: Mapping[str, Any]) -> str | None:
    """The cause of a failing pod, None when it is not failing (running, waiting to start,
    succeeded, or Pending unscheduled: the pending view says why)."""
    status = _mapping(pod.get("status"))
    phase = status.get("phase")
    raw = status.get("reason")
    reason = raw if isinstance(raw, str) else ""
    if reason in DEVICE_REASONS:
        return "device"
    if reason.startswith("OutOf") or reason in ("Evicted", "Preempted"):
        return "capacity"  # the kubelet had too little of a resource, or took it back
    found: set[str] = set()
    crashed = False
    for state in _states(status):
        waiting, terminated = _mapping(state.get("waiting")), _mapping(state.get("terminated"))
        w_reason = waiting.get("reason")
        if w_reason in IMAGE_REASONS:
            found.add("image")
        elif w_reason in WAITING_FAILURES:
            crashed = True
            if w_reason in ("RunContainerError", "CreateContainerError"):
                found.update(_words(waiting.get("message")) or ("other",))
        if terminated:
            t_reason = terminated.get("reason")
            code = terminated.get("exitCode")
            if t_reason == "OOMKilled":
                found.add("host-oom")
            elif t_reason in ("ContainerCannotRun", "StartError"):
                found.update(_words(terminated.get("message")) or ("other",))
            elif isinstance(code, int) and code != 0:
                crashed = True
                found.update(_words(terminated.get("message")))
    failed = phase == "Failed" or crashed or bool(found)
    if not failed:
        return None
    for name in ("host-oom", "device", "gpu-oom", "image", "capacity"):
        if name in found:
            return name
    return "other"


def _words(message: Any) -> tuple[str, ...]:
    if not isinstance(message, str):
        return ()
    text = message[:MESSAGE].lower()
    if any(w in text for w in GPU_OOM_WORDS):
        return ("gpu-oom",)
    if any(w in text for w in DEVICE_WORDS):
        return ("device",)
    return ()
