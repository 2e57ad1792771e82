"""`gpupolicy review` as a user runs it: a real process, real files, JSON out, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  selector: {matchLabels: {app: t}}
  template:
    metadata: {labels: {app: t}}
    spec:
      containers:
        - name: main
          image: cuda:12
          resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: web}
spec: {ports: [{port: 80}]}
"""
BAD = """\
apiVersion: v1
kind: Pod
metadata: {name: half}
spec:
  containers:
    - {name: main, image: cuda, resources: {limits: {nvidia.com/gpu: "0.5"}}}
"""


def gpupolicy(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook.cli", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("text", "args", "code", "expect"),
    [
        (DEPLOYMENT, ["--namespace", "ml"], 0,
         [("Deployment", "train", "ml", True, "/spec/template/spec/tolerations"),
          ("Service", "svc", "web", True, None)]),
        (BAD, [], 1, [("Pod", "half", "default", False, "/spec/tolerations")]),
    ],
)
def test_review_output(tmp_path: Path, text: str, args: list[str], code: int,
                       expect: list[tuple[str, str, str, bool, str | None]]) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    done = gpupolicy("review", str(path), *args)
    assert done.returncode == code, done.stderr
    results = json.loads(done.stdout)
    got = [(r["kind"], r["name"], r["namespace"], r["allowed"],
            r["patch"][0]["path"] if r["patch"] else None) for r in results]
    assert got == expect
    for r in results:
        assert set(r) == {"kind", "name", "namespace", "allowed", "patch", "mutated",
                          "violations", "warnings", "skipped", "notes"}
        assert r["skipped"] is None and r["notes"] == []


def test_review_reads_stdin() -> None:
    done = gpupolicy("review", "-", stdin=BAD)
    assert done.returncode == 1
    [result] = json.loads(done.stdout)
    assert result["violations"][0]["rule"] == "gpu-quantity-not-integer"
    path = result["violations"][0]["path"]
    assert path == "spec.containers[0].resources.limits['nvidia.com/gpu']"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["review", "/nonexistent.yaml"], "/nonexistent.yaml"),
        (["review", "-", "--policies", "/nonexistent-dir"], "/nonexistent-dir"),
        (["nosuch"], "invalid choice: 'nosuch'"),
    ],
)
def test_review_usage_errors(args: list[str], message: str) -> None:
    done = gpupolicy(*args, stdin="")
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


# Input Kubernetes would refuse to read is refused by review exactly as by lint (same reader).
@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("kind: [\n", "yaml-syntax"),
        ("apiVersion: v1\nkind: Pod\nkind: Pod\n", "yaml-duplicate-key"),
        ("a: &a [*a]\n", "yaml-alias"),
        ("a: &a [x, x, x, x, x, x, x, x, x]\n"
         + "".join(f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                   for p, c in zip("abcdefgh", "bcdefghi", strict=True)), "yaml-alias"),
        ("apiVersion: v1\nkind: Pod\nspec: " + "[" * 300 + "]" * 300 + "\n", "yaml-syntax"),
    ],
    ids=["syntax", "duplicate-key", "alias-cycle", "billion-laughs", "deep-nesting"],
)
def test_review_refuses_what_lint_refuses(tmp_path: Path, text: str, rule: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    done = gpupolicy("review", str(path))
    assert "Traceback" not in done.stderr
    assert done.returncode == 1
    refused = [r for r in json.loads(done.stdout) if not r["allowed"]]
    assert refused and refused[0]["violations"][0]["rule"] == rule
    linted = gpupolicy("lint", "--format", "json", str(path))
    assert linted.returncode == 1
    assert rule in {f["rule"] for f in json.loads(linted.stdout)["findings"]}


@pytest.mark.corpus
def test_review_a_corpus_deployment(corpus_dir: Path) -> None:
    path = corpus_dir / "kubernetes-examples" / "AI" / "vllm-deployment" / "vllm-deployment.yaml"
    done = gpupolicy("review", str(path))
    results = json.loads(done.stdout)
    [deployment] = [r for r in results if r["kind"] == "Deployment"]
    assert deployment["allowed"] is True
    tolerations = deployment["mutated"]["spec"]["template"]["spec"]["tolerations"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations
