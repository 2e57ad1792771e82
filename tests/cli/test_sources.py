"""Fail safe, never silent: every door refuses a source that yields nothing or cannot be read,
names it, and the server keeps its last good version when one breaks while it runs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from policies.engine import review
from tests.cli.test_review import gpupolicy
from tests.server.conftest import NAMESPACES, POLICIES
from webhook.inputs import sources
from webhook.inputs.state import FileSources, State

POD = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: team-a}
spec:
  containers:
  - name: c
    image: i
    resources: {limits: {nvidia.com/gpu: "5"}}
"""
NODE = """apiVersion: v1
kind: Node
metadata: {name: n, labels: {nvidia.com/gpu.product: Tesla-T4}}
status: {allocatable: {nvidia.com/gpu: "4"}}
"""


def _empty_dir(tmp: Path) -> str:
    (tmp / "empty").mkdir()
    return str(tmp / "empty")


def _no_policy_documents(tmp: Path) -> str:
    (tmp / "p").mkdir()
    (tmp / "p" / "notes.yaml").write_text("# nothing here yet\n")
    return str(tmp / "p")


def _loop(tmp: Path) -> str:
    (tmp / "loop").symlink_to(tmp / "loop")
    return str(tmp / "loop")


def _file(text: str) -> Callable[[Path], str]:
    def make(tmp: Path) -> str:
        (tmp / "f.yaml").write_text(text)
        return str(tmp / "f.yaml")
    return make


# (flag, how to make its value, what the error must say)
BAD_SOURCES = [
    ("--policies", _empty_dir, "no policy files (refusing to run with no policies)"),
    ("--policies", _no_policy_documents, "no GPUPolicy documents"),
    ("--policies", _loop, "cannot read"),
    ("--policies", _file("kind: GPUPolicy\nkind: GPUPolicy\n"), "duplicate key 'kind'"),
    ("--inventory", _file(""), "no Node objects"),
    ("--inventory", _file("apiVersion: v1\nkind: List\nitems: []\n"), "no Node objects"),
    ("--inventory", _file(NODE + "metadata: {}\n"), "duplicate key 'metadata'"),
    ("--inventory", _loop, "cannot read"),
    ("--namespaces", _file("a: &a [*a]\n"), "refers to a node that contains it"),
]
IDS = ["policies-empty-dir", "policies-no-documents", "policies-symlink-loop",
       "policies-duplicate-key", "inventory-empty-file", "inventory-empty-list",
       "inventory-duplicate-key", "inventory-symlink-loop", "namespaces-alias-cycle"]


@pytest.mark.parametrize("door", ["review", "lint", "audit", "explain"])
@pytest.mark.parametrize(("flag", "make", "message"), BAD_SOURCES, ids=IDS)
def test_every_door_refuses_a_bad_source(tmp_path: Path, door: str, flag: str,
                                         make: Callable[[Path], str], message: str) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    done = gpupolicy(door, str(pod), flag, make(tmp_path))
    assert done.returncode == 2, done.stdout
    assert message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("flag", "make", "message"), BAD_SOURCES, ids=IDS)
def test_serve_does_not_start_on_a_bad_source(tmp_path: Path, flag: str,
                                              make: Callable[[Path], str], message: str) -> None:
    done = gpupolicy("serve", "--port", "1", "--certs-dir", str(tmp_path / "certs"),
                     flag, make(tmp_path))
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def _five_gpus_refused(state: State) -> bool:
    """team-a allows at most 2 GPUs per pod (tests/server/policies)."""
    return not review(yaml.safe_load(POD), state.context, namespace="team-a").allowed


@pytest.fixture
def running(tmp_path: Path) -> tuple[State, FileSources, Path, Path]:
    policies, inventory = tmp_path / "policies", tmp_path / "nodes.yaml"
    shutil.copytree(POLICIES, policies)
    inventory.write_text(NODE)
    state = State(sources.load_catalog(), expect=("policies", "namespaces", "inventory"))
    files = FileSources(state, policies=str(policies), namespaces=[str(NAMESPACES)],
                        inventory=str(inventory), record=False)
    assert files.load_all() == []
    assert state.ready and _five_gpus_refused(state)
    return state, files, policies, inventory


def _settle(files: FileSources) -> None:
    files.poll()  # sees the change
    files.poll()  # the same fingerprint again: settled, loaded


@pytest.mark.parametrize(
    "breakage",
    ["policies emptied", "policy files removed one by one", "policies unreadable",
     "inventory truncated", "inventory unreadable"],
)
def test_a_source_that_breaks_keeps_the_last_good_version(running, breakage: str) -> None:
    state, files, policies, inventory = running
    before = [p.name for p in state.context.policies]
    if breakage == "policies emptied":
        for f in policies.iterdir():
            f.unlink()
    elif breakage == "policy files removed one by one":
        for f in sorted(policies.iterdir()):
            f.unlink()
            files.poll()  # a poll in between each step: the change never settles on a subset
        files.poll()
    elif breakage == "policies unreadable":
        shutil.rmtree(policies)
        policies.symlink_to(policies)
    elif breakage == "inventory truncated":
        inventory.write_text("")
    else:
        inventory.unlink()
        inventory.symlink_to(inventory)
    _settle(files)
    source = "inventory" if "inventory" in breakage else "policies"
    assert source in state.errors
    assert [p.name for p in state.context.policies] == before
    assert _five_gpus_refused(state)


def test_a_rewrite_is_read_once_it_has_settled(running) -> None:
    state, files, policies, _ = running
    victim = sorted(policies.iterdir())[0]
    text = victim.read_text()
    victim.write_text(text[: len(text) // 2])  # half written
    files.poll()
    assert "policies" not in state.errors  # not read yet: it may still be written
    victim.write_text(text)
    os.utime(victim, ns=(1, 1))
    _settle(files)
    assert "policies" not in state.errors
    assert _five_gpus_refused(state)


def test_serve_reads_node_templates_and_follows_their_file(tmp_path: Path) -> None:
    """`serve --node-templates FILE` (issue 28): two T4s fit no node (one GPU each), but a
    Node-shaped template of an 8-GPU node admits the pod with a note; emptied of templates,
    the file is a load error and the last good templates stay."""
    from policies.engine import review

    inventory, templates = tmp_path / "nodes.yaml", tmp_path / "templates.yaml"
    inventory.write_text(NODE.replace('"4"', '"1"'))
    templates.write_text(NODE.replace("name: n,", "name: t4-x8,").replace('"4"', '"8"'))
    state = State(sources.load_catalog(), expect=("policies", "namespaces", "inventory"))
    files = FileSources(state, policies=None, namespaces=[str(NAMESPACES)],  # bundled ones
                        inventory=str(inventory), record=False, node_templates=str(templates))
    assert files.load_all() == []
    pod = yaml.safe_load(POD.replace('"5"', '"2"'))
    decision = review(pod, state.context, namespace="team-a")
    assert decision.allowed and decision.notes == (
        "fits template t4-x8 on scale-up; no node now",)
    templates.write_text(NAMESPACES.read_text())  # no template in it any more
    _settle(files)
    assert "node_templates" in state.errors
    assert review(pod, state.context, namespace="team-a").allowed
