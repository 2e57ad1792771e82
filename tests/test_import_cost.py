"""Pay for what the input uses: which modules one `gpupolicy` run loads, in a fresh process.
`--help` and `--version` build no pydantic model; `--help` reads no installed version. A plain
Pod loads no CEL (cel_expr_python's native library and re2: ~18 MB), no DRA allocator and no
DRA object model (the parsers and their records): only the small helpers that find a pod has
no claim. A claim with a DeviceClass loads them, so the lazy path stays exercised."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Runs the command as `gpupolicy` does, then writes the loaded modules' names to stderr.
RUN = """
import json, sys
from webhook.cli import run
code = run(sys.argv[1:], sys.stdout, sys.stderr)
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers:
  - name: main
    image: trainer:1
    resources:
      limits: {nvidia.com/gpu: 1}
"""

CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
"""

TEMPLATE_AND_POD = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          selectors:
          - cel: {expression: "device.attributes['gpu.nvidia.com'].type == 'gpu'"}
---
apiVersion: v1
kind: Pod
metadata: {name: claims, namespace: ml}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: one-gpu}
  containers:
  - name: main
    image: trainer:1
    resources:
      claims: [{name: gpu}]
"""

NODES = """\
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {nvidia.com/gpu.product: NVIDIA-L4}}
status: {allocatable: {cpu: "32", nvidia.com/gpu: "1"}}
"""

INVENTORY = CLASS + """\
---
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {nvidia.com/gpu.product: NVIDIA-L4}}
status: {allocatable: {cpu: "32"}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-gpu}
spec:
  driver: gpu.nvidia.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {type: {string: gpu}, productName: {string: NVIDIA L4}}
"""

CEL = ("cel_expr_python", "re2", "policies.dra.cel", "policies.dra.cel_library")
# cel-cpp's strings, optionals and bindings: one shared library each, loaded on first need
CEL_EXTENSIONS = ("cel_expr_python.ext.ext_strings", "cel_expr_python.ext.ext_optional",
                  "cel_expr_python.ext.ext_bindings")
ALLOCATOR = ("policies.dra.allocate", "policies.dra.search")
OBJECT_MODEL = ("policies.dra.objects", "policies.dra.pools", "policies.dra.values",
                "policies.dra.problems", "policies.dra.reader", "policies.dra.parse_claims",
                "policies.dra.parse_slices", "policies.dra.taint_rules", "policies.dra.extended")

# Standard library a clean text lint has no use for: difflib (a misspelt policy field's
# suggestion), html (JUnit's escaping).
UNUSED = ("difflib", "html")

# (what, files to write, command line, modules loaded, modules not loaded)
CASES = [
    # --help reads no installed version (importlib.metadata: ~15 ms) and no engine type
    ("help, which needs no policy", {}, ["--help"], (),
     ("pydantic", "policies.model", "importlib.metadata", "policies.decision", "dataclasses")),
    ("version", {}, ["--version"], ("importlib.metadata",), ("pydantic", "policies.model")),
    ("plain GPU pod", {"pod.yaml": POD}, ["lint", "pod.yaml"], (),
     (*CEL, *ALLOCATOR, *OBJECT_MODEL, *UNUSED)),
    ("plain GPU pod, JSON report", {"pod.yaml": POD}, ["lint", "-o", "json", "pod.yaml"], (),
     (*CEL, *ALLOCATOR, *OBJECT_MODEL)),
    ("plain GPU pod against an inventory of nodes",
     {"pod.yaml": POD, "nodes.yaml": NODES}, ["lint", "--inventory", "nodes.yaml", "pod.yaml"], (),
     (*CEL, *ALLOCATOR, *OBJECT_MODEL)),
    ("claim template and its class", {"claims.yaml": CLASS + "---\n" + TEMPLATE_AND_POD},
     ["lint", "claims.yaml"], (*CEL, "policies.dra.objects", "policies.dra.parse_claims"),
     CEL_EXTENSIONS),
    ("a selector that uses the strings extension",
     {"claims.yaml": CLASS + "---\n" + TEMPLATE_AND_POD.replace(".type ==", ".type.lowerAscii() ==")},
     ["lint", "claims.yaml"], (*CEL, *CEL_EXTENSIONS), ()),
    # export compiles every expression it writes (the cost limit): CEL, never the allocator
    ("export --help, which compiles nothing", {}, ["export", "--help"], (),
     (*CEL, "policies.native.build", "pydantic")),
    ("export of the bundled policies", {}, ["export"], (*CEL, "policies.native.build"),
     (*ALLOCATOR, "kubernetes")),
    ("claim against an inventory with devices",
     {"claims.yaml": TEMPLATE_AND_POD, "inventory.yaml": INVENTORY},
     ["lint", "--inventory", "inventory.yaml", "claims.yaml"], (*CEL, *ALLOCATOR, *OBJECT_MODEL), ()),
]


def loaded_modules(tmp_path: Path, files: dict[str, str], args: list[str]) -> set[str]:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", RUN, *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert "Traceback" not in done.stderr, done.stderr
    line = done.stderr.rpartition("\nMODULES ")[2]
    return set(json.loads(line))


@pytest.mark.parametrize(("files", "args", "loaded", "absent"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_run_loads_what_the_input_uses(tmp_path: Path, files: dict[str, str], args: list[str],
                                        loaded: tuple[str, ...], absent: tuple[str, ...]
                                        ) -> None:
    modules = loaded_modules(tmp_path, files, args)
    assert not set(absent) & modules, sorted(set(absent) & modules)
    assert set(loaded) <= modules, sorted(set(loaded) - modules)


def test_the_collector_does_not_walk_what_the_imports_made(tmp_path: Path) -> None:
    """The command's imports make a great many long-lived objects: frozen once imported, the
    collector's passes skip them (walking them cost ~10 ms of a one-file lint)."""
    (tmp_path / "pod.yaml").write_text(POD, encoding="utf-8")
    script = ("import gc, io, json, sys\n"
              "from webhook.cli import run\n"
              "run(['lint', 'pod.yaml'], io.StringIO(), io.StringIO())\n"
              "print(json.dumps([gc.get_freeze_count(), gc.get_stats()[2]['collections']]))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    frozen, full = json.loads(done.stdout)
    assert frozen > 10_000 and full == 0, (frozen, full)

