"""The chart's webhooks.workloadKinds feeds the engine: rendered into a ConfigMap, mounted, and
passed to the server as --workload-kinds, where it extends the bundled table (DESIGN.md §2.5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policies.workloads import WORKLOAD_KINDS
from tests.chart.helm import render
from webhook.inputs.sources import load_workload_kinds


def _one(objects: list[dict[str, Any]], kind: str, suffix: str = "") -> dict[str, Any]:
    [found] = [o for o in objects if o["kind"] == kind and o["metadata"]["name"].endswith(suffix)]
    return found


def test_rendered_kinds_file_is_read_as_the_bundled_table(tmp_path: Path) -> None:
    objects = render()
    config = _one(objects, "ConfigMap", "-workload-kinds")
    path = tmp_path / "workload-kinds.yaml"
    path.write_text(config["data"]["workload-kinds.yaml"])
    table = load_workload_kinds(path)
    for kind in WORKLOAD_KINDS.kinds:
        [read] = [k for k in table.kinds if k.key == kind.key]
        assert set(kind.locations) <= set(read.locations), kind.key
        assert (read.containers, read.pod_fields) == (kind.containers, kind.pod_fields), kind.key


def test_server_is_given_the_file_it_mounts() -> None:
    objects = render()
    deployment = _one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    [arg] = [a for a in container["args"] if a.startswith("--workload-kinds=")]
    mounted = Path(arg.split("=", 1)[1])
    [mount] = [m for m in container["volumeMounts"] if m["mountPath"] == str(mounted.parent)]
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    config = _one(objects, "ConfigMap", "-workload-kinds")
    assert volume["configMap"]["name"] == config["metadata"]["name"]
    assert mounted.name in config["data"]
    # A changed list rolls the pods: the server reads it at start.
    assert "checksum/workload-kinds" in deployment["spec"]["template"]["metadata"]["annotations"]
