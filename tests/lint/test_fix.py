"""`gpupolicy lint --fix`: exact output for small cases, and a round trip over the corpus."""

from __future__ import annotations

import argparse
import io
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lint.helpers import MANIFESTS, POLICIES, gpupolicy

GPU_POD = """\
# header comment
apiVersion: v1
kind: Pod
metadata:
  name: p   # trailing comment
  namespace: ml-train
spec:
  containers:
  - name: c
    image: 'cuda:12'
    command: [ "sleep", "1h" ]
    resources:
      limits:
          nvidia.com/gpu: 1
"""
GPU_POD_FIXED = GPU_POD + """\
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
  runtimeClassName: nvidia
"""
OTHER = "---\n# untouched, odd layout kept\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
LIST = """\
apiVersion: v1
kind: List
items:
    - apiVersion: v1
      kind: Pod
      metadata: {name: a, namespace: ml-train}
      spec:
          containers:
              - {name: c, image: x, resources: {requests: {nvidia.com/gpu: 1}}}
"""
LIST_FIXED = """\
apiVersion: v1
kind: List
items:
    - apiVersion: v1
      kind: Pod
      metadata: {name: a, namespace: ml-train}
      spec:
          containers:
              - {name: c, image: x, resources: {requests: {nvidia.com/gpu: 1}, \
limits: {nvidia.com/gpu: 1}}}
          tolerations:
              - key: nvidia.com/gpu
                operator: Exists
                effect: NoSchedule
          runtimeClassName: nvidia
"""
JSON_POD = json.dumps({
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j", "namespace": "ml-train"},
    "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
}, indent=4) + "\n"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@pytest.mark.parametrize(("name", "before", "after"), [
    ("pod.yaml", GPU_POD, GPU_POD_FIXED),
    ("two.yaml", GPU_POD + OTHER, GPU_POD_FIXED + OTHER),
    # the blank line that ends a document stays after what is appended to it
    ("blank.yaml", GPU_POD + "\n\n" + OTHER, GPU_POD_FIXED + "\n\n" + OTHER),
    ("first-untouched.yaml", OTHER.removeprefix("---\n") + "---\n" + GPU_POD,
     OTHER.removeprefix("---\n") + "---\n" + GPU_POD_FIXED),
    ("crlf.yaml", GPU_POD.replace("\n", "\r\n"), GPU_POD_FIXED.replace("\n", "\r\n")),
    ("bom.yaml", "\ufeff" + GPU_POD, "\ufeff" + GPU_POD_FIXED),
    ("no-newline.yaml", GPU_POD.rstrip("\n"), GPU_POD_FIXED),
    ("list.yaml", LIST, LIST_FIXED),
    ("clean.yaml", OTHER, OTHER),
])
def test_fix_exact(tmp_path: Path, name: str, before: str, after: str) -> None:
    path = tmp_path / name
    path.write_bytes(before.encode())
    run = gpupolicy("lint", "--policies", str(POLICIES), "--fix", str(path))
    assert run.code == 0, run.out + run.err
    assert path.read_bytes().decode() == after
    again = gpupolicy("lint", "--policies", str(POLICIES), "--fix", "--show-mutations",
                      str(path))
    assert path.read_bytes().decode() == after  # a second --fix changes nothing
    assert "mutation" not in again.out


def test_fix_json_keeps_indent_and_key_order(tmp_path: Path) -> None:
    path = tmp_path / "pod.json"
    path.write_text(JSON_POD)
    gpupolicy("lint", "--policies", str(POLICIES), "--fix", str(path))
    text = path.read_text()
    data = json.loads(text)
    assert list(data) == ["apiVersion", "kind", "metadata", "spec"]
    assert data["spec"]["tolerations"] == [TOLERATION]
    assert '\n    "kind": "Pod"' in text


def test_dry_run_prints_a_diff_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD)
    run = gpupolicy("lint", "--policies", str(POLICIES), "--fix-dry-run", str(path))
    assert path.read_text() == GPU_POD
    assert f"--- {path}\n+++ {path}\n" in run.out
    assert "+  runtimeClassName: nvidia\n" in run.out


def test_fix_refuses_a_file_with_duplicate_keys(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    before = GPU_POD.replace("  name: p", "  name: p\n  name: q")
    path.write_text(before)
    run = gpupolicy("lint", "--policies", str(POLICIES), "--fix", str(path))
    assert path.read_text() == before
    assert "not fixed" in run.err and run.code == 1


def test_fix_on_fixture_manifests(tmp_path: Path) -> None:
    shutil.copytree(MANIFESTS, tmp_path / "m")
    gpupolicy("lint", "--policies", str(POLICIES), "--fix", ".", cwd=tmp_path / "m")
    fixed = (tmp_path / "m" / "training.yaml").read_text()
    original = (MANIFESTS / "training.yaml").read_text()
    assert _additions_only(original, fixed)
    docs = list(yaml.safe_load_all(fixed))
    assert len(docs) == len(list(yaml.safe_load_all(original)))
    assert docs[2]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": 1}


def _comments(text: str) -> Counter[str]:
    return Counter(line.strip() for line in text.splitlines() if line.lstrip().startswith("#"))


def _additions_only(original: str, fixed: str) -> bool:
    """Every original line is still there, in order (a missing final newline aside)."""
    lines = iter(fixed.splitlines())
    return all(any(line == other for other in lines) for line in original.splitlines())


FULL_INJECT = MANIFESTS.parent / "full-inject"


@pytest.mark.corpus
@pytest.mark.parametrize(("policies", "least", "refused"), [
    (None, 40, 0),  # the bundled policy: tolerations and GPU limits
    # every inject field; NVIDIA_VISIBLE_DEVICES=none reaches every pod, so 400+ files change.
    # The 3 files with duplicate keys that need a change are refused, as Kubernetes would.
    (FULL_INJECT, 400, 3),
])
def test_fix_round_trip_over_the_corpus(
    corpus_dir: Path, tmp_path: Path, policies: Path | None, least: int, refused: int
) -> None:
    """Every corpus file that needs a mutation: fixed, it parses, keeps every comment and every
    line, keeps its documents, and lints with no mutation left; a second --fix is a no-op."""
    work = tmp_path / "corpus"
    shutil.copytree(corpus_dir, work, ignore=shutil.ignore_patterns("*.md"))
    for path in work.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    chosen = ("--policies", str(policies)) if policies else ()
    chosen = (*chosen, "--no-render")  # the corpus's partial kustomizations stay files
    first = gpupolicy("lint", *chosen, "--fix", str(work))
    changed = [p for p in sorted(work.rglob("*.y*ml"))
               if p.read_bytes() != (corpus_dir / p.relative_to(work)).read_bytes()]
    assert len(changed) >= least, first.err
    assert first.err.count("not fixed") == refused, first.err
    for path in changed:
        before = (corpus_dir / path.relative_to(work)).read_text()
        after = path.read_text()
        assert len(list(yaml.safe_load_all(after))) == len(list(yaml.safe_load_all(before)))
        assert _comments(after) == _comments(before), path
        assert _additions_only(before, after), path
    snapshot = {p: p.read_bytes() for p in changed}
    gpupolicy("lint", *chosen, "--fix", str(work))
    assert {p: p.read_bytes() for p in changed} == snapshot
    again = gpupolicy("lint", *chosen, "--show-mutations", "--format", "json", str(work))
    left = {f["file"] for f in json.loads(again.out)["findings"] if f["rule"] == "mutation"}
    assert left == {line.removeprefix("gpupolicy lint: ").split(": not fixed")[0]
                    for line in first.err.splitlines() if "not fixed" in line}


def test_a_file_named_twice_is_fixed_once(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD)
    run = gpupolicy("lint", "--policies", str(POLICIES), "--fix", str(path), str(tmp_path),
                    f"{tmp_path}/../{tmp_path.name}/pod.yaml")
    assert run.code == 0, run.err
    assert path.read_text() == GPU_POD_FIXED


def test_dry_run_diff_applies_with_git_apply(tmp_path: Path) -> None:
    """The diff is a real unified diff (a missing final newline marked): `git apply` takes it."""
    import subprocess

    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD.rstrip("\n"))
    run = gpupolicy("lint", "--policies", str(POLICIES), "--fix-dry-run", "pod.yaml",
                    cwd=tmp_path)
    assert "\\ No newline at end of file\n" in run.out
    assert "0 problems" in run.err  # the report goes to stderr, stdout is the diff alone
    subprocess.run(["git", "apply"], input=run.out.encode(), cwd=tmp_path, check=True)
    assert path.read_text() == GPU_POD_FIXED


def test_dry_run_diff_of_a_long_stream(tmp_path: Path) -> None:
    """Many documents, one changed in the middle: the hunk carries context from the documents
    around it (so `git apply` places it), and a repetitive stream still gets one small hunk."""
    import subprocess

    other = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: b}\n"
    text = "---\n".join([other] * 300 + [GPU_POD] + [other] * 300)
    path = tmp_path / "stream.yaml"
    path.write_text(text)
    run = gpupolicy("lint", "--policies", str(POLICIES), "--fix-dry-run", "stream.yaml",
                    cwd=tmp_path)
    hunks = [line for line in run.out.splitlines() if line.startswith("@@")]
    assert hunks == ["@@ -1512,6 +1512,11 @@"]  # 300 documents of 4 lines and a `---` first
    # trailing context comes from the next document
    assert run.out.splitlines()[-3:] == [" ---", " apiVersion: v1", " kind: ConfigMap"]
    subprocess.run(["git", "apply"], input=run.out.encode(), cwd=tmp_path, check=True)
    assert path.read_text() == text.replace(GPU_POD, GPU_POD_FIXED)


@pytest.mark.parametrize(("text", "expected"), [
    ("a:\n  b: 1\n  l:\n  - x\n", (2, 0)),
    ("a:\n    b:\n      - x\n", (4, 2)),
    ("items:\n    - apiVersion: v1\n      spec:\n          c: 1\n", (4, 4)),
    ("spec:\n  # comment:\n  containers:\n    - name: c  # note:\n      env: []\n", (2, 2)),
    ("a: 1\n", (2, 0)),
    ("", (2, 0)),
])
def test_guess_indent(text: str, expected: tuple[int, int]) -> None:
    from webhook.output.fix import guess_indent

    assert guess_indent(text) == expected


def _read_only(path: Path) -> None:
    path.chmod(0o444)


def _edited_meanwhile(path: Path) -> None:
    path.write_text(path.read_text() + "# saved by an editor while lint ran\n")


@pytest.mark.parametrize(("spoil", "why"), [
    (_read_only, "the file is read-only"),
    (_edited_meanwhile, "the file changed while it was linted"),
])
def test_fix_never_overwrites_what_it_must_not(tmp_path: Path, spoil: Any, why: str) -> None:
    from policies import yamlpos
    from webhook.commands import lint
    from webhook.inputs import sources
    from webhook.output import fix

    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD)
    linted = path.read_bytes()
    context, _ = sources.build_context(argparse.Namespace(
        policies=str(POLICIES), inventory=None, namespaces=[], exclude_namespace=None))
    result = lint.Result()
    lint.lint_stream(str(path), yamlpos.iter_stream(linted), context, result, namespace="ml")
    assert result.edits
    spoil(path)
    before = path.read_bytes()
    err = io.StringIO()
    failed = fix.apply_edits({str(path): linted}, result.edits, write=True,
                             stdout=io.StringIO(), stderr=err)
    assert failed == 1 and why in err.getvalue()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["pod.yaml"]  # no temporary left behind


def test_fix_exits_non_zero_when_a_file_cannot_be_fixed(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD)
    path.chmod(0o444)
    run = gpupolicy("lint", "--fix", "--policies", str(POLICIES), "--namespace", "ml", str(path))
    assert run.code == 2
    assert "not fixed: the file is read-only" in run.err
    assert path.read_text() == GPU_POD


def test_fix_keeps_the_file_mode(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(GPU_POD)
    path.chmod(0o640)
    run = gpupolicy("lint", "--fix", "--policies", str(POLICIES), "--namespace", "ml", str(path))
    assert run.code in (0, 1), run.err
    assert path.read_text() != GPU_POD
    assert path.stat().st_mode & 0o777 == 0o640
