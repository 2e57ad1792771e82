"""Image references of every legal shape (and illegal ones) and hostile node label values
through the operator's-checklist rules: nothing raises, and a tag that says no CUDA version
(no tag, a digest alone, an uppercase path, a tag that is not a version) keeps
cuda-driver-too-old silent."""

from __future__ import annotations

import copy
import string
from functools import cache
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.catalog import Catalog
from policies.context import Context
from policies.cuda import node_driver, node_runtime
from policies.engine import review
from tests.engine import casetable
from webhook.inputs.reading import read_objects
from webhook.inputs.sources import inventory_of, load_catalog, load_policies

pytestmark = pytest.mark.fuzz
# The operator's-checklist rules, whose messages quote node labels: kept short whatever the
# labels hold.
CHECKLIST = frozenset({"cuda-driver-too-old", "gpu-mixed-architectures", "gpu-stack-misses-gpu-nodes",
                       "gpu-stack-not-critical", "mig-name-single-strategy", "gpu-share-whole-card"})

LOWER = string.ascii_lowercase + string.digits
COMPONENT = st.text(alphabet=LOWER, min_size=1, max_size=8)
SEPARATED = st.builds(lambda a, s, b: f"{a}{s}{b}", COMPONENT, st.sampled_from([".", "_", "__", "-", "--"]),
                      COMPONENT)
PATHS = st.lists(st.one_of(COMPONENT, SEPARATED, st.sampled_from(["nvidia", "cuda"])),
                 min_size=1, max_size=4).map("/".join)
REGISTRIES = st.one_of(
    st.none(), st.sampled_from(["docker.io", "nvcr.io", "localhost", "localhost:5000",
                                "registry.example.com:443", "10.0.0.1:5000", "[::1]:5000"]),
    st.builds(lambda h, p: f"{h}.io:{p}", COMPONENT, st.integers(0, 99999)))
TAGS = st.one_of(
    st.none(), st.sampled_from(["12.2.0-base-ubuntu22.04", "11.4.3-runtime", "24.01-py3", "latest",
                                "12.2", "12", "99.99.99-x", "1.2.3.4", "v12.2.0", "12.2-"]),
    st.text(alphabet=string.ascii_letters + string.digits + "._-", min_size=1, max_size=20))
DIGESTS = st.one_of(st.none(), st.builds(lambda h: "sha256:" + h,
                                         st.text(alphabet="0123456789abcdef", min_size=64,
                                                 max_size=64)))


@st.composite
def references(draw: Any) -> str:
    registry, path, tag, digest = draw(REGISTRIES), draw(PATHS), draw(TAGS), draw(DIGESTS)
    if draw(st.booleans()):
        path = "nvidia/" + draw(st.sampled_from(["cuda", "pytorch", "tritonserver", "CUDA"]))
    ref = f"{registry}/{path}" if registry else path
    if tag is not None:
        ref += f":{tag}"
    if digest is not None:
        ref += f"@{digest}"
    if draw(st.integers(0, 9)) == 0:  # an illegal shape now and then
        ref = draw(st.sampled_from([ref.upper(), ref + ":", ":" + ref, ref + "@", ref * 40]))
    return ref


HOSTILE_VALUES = st.one_of(
    st.sampled_from(["470.57.02", "470", "", "-1", "1e5", "99999999999999999999999", "٤٧٠",
                     "470.57.02\x00", "12.2", "x.y.z", "." * 40, "1" * 5000, "535..104"]),
    st.text(max_size=40))
DRIVER_KEYS = ["nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.driver-version.major",
               "nvidia.com/cuda.driver-version.minor", "nvidia.com/cuda.driver-version.revision",
               "nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor",
               "nvidia.com/cuda.driver.rev", "nvidia.com/cuda.runtime-version.major",
               "nvidia.com/cuda.runtime-version.minor", "nvidia.com/cuda.runtime-version.full",
               "kubernetes.io/arch", "nvidia.com/gpu.product", "nvidia.com/mig.strategy",
               "nvidia.com/gpu.present", "kubernetes.io/hostname"]


@cache
def _catalog() -> Catalog:
    return load_catalog()


@cache
def _nodes() -> list[dict[str, Any]]:
    return read_objects(casetable.inventory_file("operator"))


def _context(nodes: list[dict[str, Any]]) -> Context:
    inventory = inventory_of(nodes, (), (), _catalog())
    return Context(policies=load_policies(), catalog=_catalog(),
                   inventory=inventory)


def _pod(image: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml-train"},
            "spec": {"nodeSelector": selector, "containers": [
                {"name": "main", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def _says_no_version(ref: str) -> bool:
    """No tag (the last colon is a registry port's, or there is none) or an uppercase path."""
    name = ref.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return ":" not in last or any(c.isupper() for c in name.rsplit(":", 1)[0].split("/", 1)[-1])


@given(references())
def test_image_references_never_break_the_rules(ref: str) -> None:
    table = _catalog().cuda
    found = table.image(ref)
    if _says_no_version(ref):
        assert found is None, ref
    decision = review(_pod(ref, {"nvidia.com/gpu.product": "Tesla-T4"}), _context(_nodes()),
                      namespace="ml-train")
    if found is None:
        assert "cuda-driver-too-old" not in {v.rule for v in decision.violations}, ref


@given(st.dictionaries(st.sampled_from(DRIVER_KEYS), HOSTILE_VALUES, max_size=6),
       st.sampled_from(["nvidia/cuda:12.2.0-base-ubuntu22.04", "nvcr.io/nvidia/pytorch:24.01-py3",
                        "nvidia/cuda:11.4.3-base"]))
def test_hostile_label_values_never_break_the_rules(labels: dict[str, str], image: str) -> None:
    assert node_driver(labels) is None or all(v >= 0 for v in node_driver(labels) or ())
    assert node_runtime(labels) is None or len(node_runtime(labels) or ()) == 2
    nodes = copy.deepcopy(_nodes())
    for node in nodes:
        node["metadata"]["labels"].update(labels)
    context = _context(nodes)
    for obj in (_pod(image, {}), _pod(image, {"kubernetes.io/arch": "amd64"}), _stack()):
        decision = review(obj, context, namespace="gpu-operator"
                          if obj["kind"] == "DaemonSet" else "ml-train")
        assert all(len(v.message) < 2000 for v in decision.violations if v.rule in CHECKLIST)


def _stack() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "dp", "namespace": "gpu-operator"},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"nodeSelector": {"kubernetes.io/arch": "amd64"},
                         "containers": [{"name": "p",
                                         "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}]}}}}
