"""`gpupolicy lint DIR` on a repository as it is: a Helm chart and Kustomize overlays rendered
with the real helm and kubectl (tools/bin), plain manifests beside them, and YAML that is not
Kubernetes objects at all (a workflow, a values file, docker-compose). Every finding is at the
template, base or patch line that wrote it, in every output format."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.docs import documented
from tests.lint.helpers import FIXTURES, ROOT, gpupolicy, gpupolicy_process, tool
from tests.lint.test_lint import _sarif_validator

REPO = FIXTURES / "repo"
POLICY = FIXTURES / "repo-policy.yaml"
R = "tests/lint/fixtures/repo"
CHART = f"{R}/charts/trainer"
SERVE, DEV = f"{R}/kustomize/overlays/serve", f"{R}/kustomize/overlays/dev"

# (file, line, column, rule) of every finding: the chart's template (its first line is
# `{{- if }}`, which helm trims), the base both overlays render, the patch file and the inline
# patch that set the GPU count, and a plain manifest.
EXPECTED = [
    (f"{CHART}/templates/deployment.yaml", 17, 7, "gpu-max-per-pod"),
    (f"{CHART}/templates/deployment.yaml", 22, 15, "gpu-max-per-container"),
    (f"{R}/kustomize/base/deployment.yaml", 12, 7, "gpu-max-per-pod"),  # through serve
    (f"{R}/kustomize/base/deployment.yaml", 12, 7, "gpu-max-per-pod"),  # through dev
    (f"{SERVE}/gpus.yaml", 12, 15, "gpu-max-per-container"),
    (f"{DEV}/Kustomization", 6, 5, "gpu-max-per-container"),  # kustomize's third spelling
    (f"{R}/manifests/train.yaml", 10, 7, "gpu-max-per-pod"),
    (f"{R}/manifests/train.yaml", 15, 15, "gpu-max-per-container"),
    # a pod whose claim template is not among the inputs: not judged, and said so
    (f"{R}/manifests/dra-pod.yaml", 8, 7, "dra-claim-unresolved"),
]
NOT_MANIFESTS = ("ci/build.yml", "docker-compose.yml", "values-prod.yaml")


@pytest.fixture(autouse=True)
def _tools_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    tool("helm")  # fails clearly when `make tools/bin/.installed` was not run
    monkeypatch.setenv("PATH", f"{ROOT / 'tools' / 'bin'}{os.pathsep}{os.environ['PATH']}")


def _lint(*extra: str, path: str = R) -> tuple[int, list[dict[str, object]], str]:
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", *extra, path, cwd=ROOT)
    return run.code, json.loads(run.out)["findings"] if run.out else [], run.err


def _where(findings: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return sorted((f["file"], f["line"], f["column"], f["rule"]) for f in findings)


def test_findings_are_at_the_template_base_and_patch_lines() -> None:
    code, findings, err = _lint()
    assert code == 1, err
    assert _where(findings) == sorted(EXPECTED)
    lines = {(f["file"], f["line"]): f for f in findings}
    template = (REPO / "charts/trainer/templates/deployment.yaml").read_text().splitlines()
    assert template[22 - 1].strip() == "nvidia.com/gpu: {{ .Values.gpus }}"
    patch = (REPO / "kustomize/overlays/serve/gpus.yaml").read_text().splitlines()
    assert patch[12 - 1].strip() == "nvidia.com/gpu: 16"
    # the overlay that rendered a finding is said; the objects are the rendered ones
    served = lines[(f"{SERVE}/gpus.yaml", 12)]
    assert f"rendered by overlay {SERVE}" in str(served["message"])
    assert served["object"] == "Deployment ml-serve/infer"
    base = [f for f in findings if f["file"] == f"{R}/kustomize/base/deployment.yaml"]
    assert {f["object"] for f in base} == {"Deployment ml-serve/infer",
                                           "Deployment ml-dev/infer-dev"}
    assert lines[(f"{CHART}/templates/deployment.yaml", 22)]["object"] == (
        "Deployment default/release-name-trainer")
    # nothing at a file that is not in the repository, nothing about the non-manifests
    assert all((ROOT / str(f["file"])).is_file() for f in findings)
    assert not any("yaml-" in str(f["rule"]) for f in findings)


def test_origin_annotations_do_not_reach_the_review() -> None:
    """The same overlay piped from `kubectl kustomize` (no annotations) gets the same rules
    for the same objects."""
    import subprocess

    rendered = subprocess.run([tool("kubectl"), "kustomize", str(ROOT / SERVE)],
                              capture_output=True, check=True, timeout=120).stdout
    piped = gpupolicy_process("lint", "--policies", str(POLICY), "-o", "json", "-",
                              stdin=rendered, cwd=ROOT)
    code, findings, _ = _lint(path=SERVE)
    assert code == piped.code == 1
    verdict = sorted((f["object"], f["rule"], f["path"]) for f in findings)
    assert verdict == sorted((f["object"], f["rule"], f["path"])
                             for f in json.loads(piped.out)["findings"])


@pytest.mark.parametrize(("fmt", "expect"), [
    ("text", [f"{SERVE}/gpus.yaml", "  12:15", f"{CHART}/templates/deployment.yaml", "  22:15"]),
    ("github", [f"::error file={SERVE}/gpus.yaml,line=12,col=15",
                f"::error file={CHART}/templates/deployment.yaml,line=22,col=15",
                f"::error file={DEV}/Kustomization,line=6,col=5"]),
    ("junit", [f'<testsuite name="{SERVE}/gpus.yaml" tests="1" failures="1"',
               f'<testsuite name="{CHART}/templates/deployment.yaml" tests="2" failures="2"',
               f'<testsuite name="{R}/manifests/config.yaml" tests="1" failures="0"']),
])
def test_every_format_names_the_files_that_wrote_the_fields(fmt: str, expect: list[str]) -> None:
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", fmt, "--color", "never", R,
                    cwd=ROOT)
    assert run.code == 1, run.err
    for part in expect:
        assert part in run.out
    for name in NOT_MANIFESTS:
        assert name not in run.out


def test_sarif_is_valid_and_points_into_the_repository() -> None:
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "sarif", R, cwd=ROOT)
    assert run.code == 1, run.err
    log = json.loads(run.out)
    errors = list(_sarif_validator().iter_errors(log))
    assert errors == [], [e.message for e in errors]
    got = set()
    for result in log["runs"][0]["results"]:
        location = result["locations"][0]["physicalLocation"]
        uri = unquote(location["artifactLocation"]["uri"])
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert (ROOT / uri).is_file()
        assert result["partialFingerprints"]
        got.add((uri, location["region"]["startLine"], location["region"]["startColumn"],
                 result["ruleId"]))
    assert got == set(EXPECTED)
    for rule in log["runs"][0]["tool"]["driver"]["rules"]:  # documented where helpUri points
        assert documented(rule["helpUri"]), rule["id"]
        assert rule["help"]["text"], rule["id"]


def test_non_manifests_are_skipped_and_listed_under_verbose() -> None:
    code, findings, err = _lint()
    assert code == 1 and not any(n in err for n in NOT_MANIFESTS)
    code, findings, err = _lint("-v")
    assert code == 1
    for name in NOT_MANIFESTS:
        assert f"{R}/{name}: skipped, not a Kubernetes manifest" in err
    assert f"{R}/kustomize/base: a Kustomize base, linted through the overlays" in err
    assert f"{R}/scratch: skipped, excluded" in err  # by the repository's .gpupolicyignore
    assert not any(str(f["file"]).endswith(NOT_MANIFESTS) for f in findings)
    assert ".github" not in err  # hidden folders are not read at all


def test_exclude_and_gpupolicyignore(tmp_path: Path) -> None:
    code, findings, _ = _lint("--exclude", "manifests/", "--exclude", "**/overlays/dev")
    assert code == 1
    files = {f["file"] for f in findings}
    assert not any(str(f).startswith((f"{R}/manifests", DEV)) for f in files)
    assert f"{SERVE}/gpus.yaml" in files
    # without the ignore file the scratch draft (a tab in it) is linted, and refused
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    (repo / ".gpupolicyignore").unlink()
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", str(repo), cwd=tmp_path)
    assert "yaml-tab" in {f["rule"] for f in json.loads(run.out)["findings"]}
    (repo / ".gpupolicyignore").write_text("# drafts\n*.yaml\n!manifests/*.yaml\n"
                                           "kustomize/\n/charts\nscratch\n")
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", "-v", str(repo),
                    cwd=tmp_path)
    assert {Path(str(f["file"])).name for f in json.loads(run.out)["findings"]} == {
        "train.yaml", "dra-pod.yaml"}


def test_without_helm_or_kubectl_each_chart_and_overlay_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no helm, kubectl nor kustomize
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", R, cwd=ROOT)
    assert run.code == 2
    assert run.err.splitlines() == [
        f"gpupolicy lint: {CHART}: not rendered: helm not found (install helm, or pass "
        "--no-render to lint the files as they are)",
        f"gpupolicy lint: {DEV}: not rendered: kubectl not found (nor kustomize; install one, "
        "or pass --no-render to lint the files as they are)",
        f"gpupolicy lint: {SERVE}: not rendered: kubectl not found (nor kustomize; install "
        "one, or pass --no-render to lint the files as they are)",
    ]
    findings = json.loads(run.out)["findings"]  # the plain manifests are still linted
    assert {f["file"] for f in findings} == {f"{R}/manifests/train.yaml",
                                             f"{R}/manifests/dra-pod.yaml"}


def test_no_render_reads_the_files_as_they_are() -> None:
    code, findings, _ = _lint("--no-render")
    assert code == 1
    templates = [f for f in findings if f["file"] == f"{CHART}/templates/deployment.yaml"]
    assert templates and {f["rule"] for f in templates} == {"yaml-syntax"}
    patch = [f for f in findings if f["file"] == f"{SERVE}/gpus.yaml"]
    assert [f["object"] for f in patch] == ["Deployment default/infer"] * len(patch)


def test_a_chart_that_does_not_render_is_one_error(tmp_path: Path) -> None:
    chart = tmp_path / "broken"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: broken\nversion: 0.1.0\n")
    (chart / "templates" / "pod.yaml").write_text("kind: {{ .Values.x | nosuchfunction }}\n")
    run = gpupolicy("lint", "-o", "json", str(chart), cwd=tmp_path)
    assert run.code == 2
    (line,) = run.err.splitlines()
    assert line.startswith(f"gpupolicy lint: {chart}: helm template failed (exit 1): ")
    assert "nosuchfunction" in line


def test_helm_values_and_sets_reach_every_chart() -> None:
    code, findings, err = _lint("--helm-set", "gpus=2", path=CHART)
    assert (code, findings) == (0, []), err
    code, findings, _ = _lint("--helm-values", f"{R}/values-prod.yaml", path=CHART)
    assert (code, findings) == (0, [])
    code, findings, _ = _lint("--helm-set", "enabled=false", path=CHART)
    assert (code, findings) == (0, [])


def test_helm_output_from_elsewhere_says_the_chart_is_not_found(tmp_path: Path) -> None:
    import subprocess

    rendered = subprocess.run([tool("helm"), "template", str(REPO / "charts" / "trainer")],
                              capture_output=True, check=True, timeout=120).stdout
    run = gpupolicy_process("lint", "--policies", str(POLICY), "-o", "json",
                            "--stdin-filename", "out.yaml", "-", stdin=rendered, cwd=tmp_path)
    assert run.code == 1
    assert "helm chart 'trainer' not found under" in run.err
    findings = json.loads(run.out)["findings"]
    assert {f["file"] for f in findings} == {"out.yaml"}  # no invented trainer/templates/...
    lines = rendered.decode().splitlines()
    for f in findings:
        assert "chart 'trainer' not found here" in str(f["message"])
        assert lines[int(str(f["line"])) - 1].strip() in ("containers:", "nvidia.com/gpu: 16")
    # from the repository the same output lands on the template, at the template's lines
    run = gpupolicy_process("lint", "--policies", str(POLICY), "-o", "json", "-",
                            stdin=rendered, cwd=REPO)
    assert {(f["file"], f["line"]) for f in json.loads(run.out)["findings"]} == {
        ("charts/trainer/templates/deployment.yaml", 17),
        ("charts/trainer/templates/deployment.yaml", 22)}


@pytest.mark.parametrize(("template", "rendered", "expected"), [
    # helm trims the newline a first `{{- if }}` leaves: line 1 of the output is line 2
    (["{{- if .Values.on }}", "a: 1", "b: {{ .Values.b }}", "{{- end }}"],
     ["a: 1", "b: 2"], [2, 3]),
    # an `{{- if }}` in the middle renders nothing; a false one drops its body
    (["a: 1", "{{- if .x }}", "b: 2", "{{- end }}", "c: {{ .c }}"], ["a: 1", "c: 3"], [1, 5]),
    # the lines one action writes go to that action's line
    (["meta:", "  labels:", "    {{- include \"l\" . | nindent 4 }}", "spec: {}"],
     ["meta:", "  labels:", "    x: 1", "    y: 2", "spec: {}"], [1, 2, 3, 3, 4]),
])
def test_rendered_lines_map_to_template_lines(
    template: list[str], rendered: list[str], expected: list[int]
) -> None:
    from webhook.output.helm import align

    assert align(template, rendered) == expected


def test_a_tool_that_hangs_or_floods_is_stopped() -> None:
    from webhook.inputs.render import RenderError, run

    start = time.monotonic()
    with pytest.raises(RenderError, match=r"took longer than 0\.5s"):
        run(["sleep", "30"], "helm template", timeout=0.5)
    with pytest.raises(RenderError, match="printed more than 1 MiB"):
        run(["yes"], "helm template", limit=1024 * 1024)
    assert time.monotonic() - start < 10


def test_a_claim_lint_cannot_judge_is_a_warning_at_its_entry(tmp_path: Path) -> None:
    code, findings, err = _lint("-v", path=f"{R}/manifests/dra-pod.yaml")
    assert code == 0  # a warning: the pod may well be fine
    (found,) = findings
    assert (found["rule"], found["severity"], found["line"], found["column"]) == (
        "dra-claim-unresolved", "warning", 8, 7)
    assert found["path"] == "spec.resourceClaims[0]"
    assert "ResourceClaimTemplate ml-train/one-gpu is not known here" in str(found["message"])
    assert "not known here" not in err  # a finding, not a -v note
    # with the template among the inputs the pod is judged, and nothing is left to say
    template = tmp_path / "template.yaml"
    template.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata:\n"
        "  name: one-gpu\n  namespace: ml-train\nspec:\n  spec:\n    devices:\n"
        "      requests:\n        - name: gpu\n          exactly:\n"
        "            deviceClassName: gpu.nvidia.com\n")
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", str(template),
                    f"{R}/manifests/dra-pod.yaml", cwd=ROOT)
    assert run.code == 0, run.err
    assert "dra-claim-unresolved" not in run.out


def test_a_template_or_patch_named_alone_renders_its_chart_or_overlay() -> None:
    """pre-commit names the changed files: a template or a patch is never read as YAML."""
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", "-v",
                    f"{CHART}/templates/deployment.yaml", f"{SERVE}/gpus.yaml",
                    f"{CHART}/templates", cwd=ROOT)
    assert run.code == 1, run.err
    got = _where(json.loads(run.out)["findings"])
    assert got == sorted([*(e for e in EXPECTED if e[0].startswith((CHART, SERVE))),
                          (f"{R}/kustomize/base/deployment.yaml", 12, 7, "gpu-max-per-pod")])
    assert f"{CHART}/templates/deployment.yaml: part of {CHART}, rendered whole" in run.err
    # from inside the chart, the chart is named relative to where lint runs
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", ".",
                    cwd=REPO / "charts" / "trainer" / "templates")
    assert {(f["file"], f["line"]) for f in json.loads(run.out)["findings"]} == {
        ("../templates/deployment.yaml", 17), ("../templates/deployment.yaml", 22)}


def test_fix_leaves_charts_and_overlays_alone_and_says_so(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    policy = tmp_path / "inject.yaml"
    policy.write_text(POLICY.read_text().replace("  rules:", "  inject:\n"
                                                 "    runtimeClassName: nvidia\n  rules:"))
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    run = gpupolicy("lint", "--policies", str(policy), "--fix", str(repo), cwd=tmp_path)
    changed = {p.relative_to(repo).as_posix() for p, b in before.items() if p.read_bytes() != b}
    assert changed == {"manifests/train.yaml"}  # the only plain GPU manifest
    for name in ("charts/trainer", "kustomize/overlays/dev", "kustomize/overlays/serve"):
        assert f"{repo / name}: not changed: rendered, so --fix cannot write" in run.err


def test_gpupolicyignore_above_the_folder_linted_applies_under_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(REPO, repo)
    (repo / ".git").mkdir()  # the repository's root: ignore files above it are not read
    (tmp_path / ".gpupolicyignore").write_text("*\n")
    (repo / ".gpupolicyignore").write_text("scratch/\nmanifests/train.yaml\n")
    (repo / "manifests" / ".gpupolicyignore").write_text("!train.yaml\nconfig.yaml\n")
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", "-v", "manifests",
                    cwd=repo)
    files = {f["file"] for f in json.loads(run.out)["findings"]}
    assert files == {"manifests/train.yaml", "manifests/dra-pod.yaml"}  # the nearer file wins
    assert "manifests/config.yaml: skipped, excluded" in run.err
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", "--exclude", "train.*",
                    "manifests", cwd=repo)
    assert {f["file"] for f in json.loads(run.out)["findings"]} == {"manifests/dra-pod.yaml"}


def test_a_file_the_reader_refuses_is_reported_whatever_it_was_meant_to_be(
    tmp_path: Path,
) -> None:
    """Only YAML that reads cleanly can be told to hold no Kubernetes object: what cannot be
    read is refused, as review refuses it (fail safe, never silent)."""
    (tmp_path / "values.yaml").write_text("gpus: 4\nimage: x\n")
    (tmp_path / "broken.yaml").write_text("a: &a [*a]\n")
    run = gpupolicy("lint", "-o", "json", "-v", str(tmp_path), cwd=tmp_path)
    assert run.code == 1
    assert {(Path(str(f["file"])).name, f["rule"]) for f in json.loads(run.out)["findings"]} == {
        ("broken.yaml", "yaml-alias")}
    assert f"{tmp_path}/values.yaml: skipped, not a Kubernetes manifest" in run.err


def test_a_packaged_subchart_is_not_given_a_path_that_does_not_exist(tmp_path: Path) -> None:
    chart = tmp_path / "app"
    shutil.copytree(REPO / "charts" / "trainer", chart / "charts" / "trainer")
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: app\nversion: 0.1.0\n"
                                      "dependencies:\n  - name: trainer\n    version: 0.1.0\n")
    (chart / "templates").mkdir()
    import subprocess

    subprocess.run([tool("helm"), "package", "-d", str(chart / "charts"),
                    str(chart / "charts" / "trainer")], check=True, capture_output=True,
                   timeout=120)
    shutil.rmtree(chart / "charts" / "trainer")  # only trainer-0.1.0.tgz is left, as vendored
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", "app", cwd=tmp_path)
    assert run.code == 1, run.err
    findings = json.loads(run.out)["findings"]
    assert {f["file"] for f in findings} == {"app"}  # the chart, at its rendered lines
    assert all("from template app/charts/trainer/templates/deployment.yaml; no such file in "
               "the chart here" in str(f["message"]) for f in findings)


def test_a_failing_tool_is_one_bounded_line() -> None:
    from webhook.inputs.render import RenderError, run

    start = time.monotonic()
    script = "import sys; sys.stderr.write('noise ' * 2_000_000 + 'the real error'); sys.exit(3)"
    with pytest.raises(RenderError) as caught:
        run([sys.executable, "-c", script], "helm template", timeout=60)
    message = str(caught.value)
    assert message.startswith("helm template failed (exit 3): ...")
    assert message.endswith("the real error") and len(message) < 700
    assert "\n" not in message
    assert time.monotonic() - start < 30


def test_a_gpupolicyignore_in_a_subfolder_applies_under_it(tmp_path: Path) -> None:
    """As a nested .gitignore: linting the repository's parent still leaves out scratch/."""
    shutil.copytree(REPO, tmp_path / "repo")
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", "-v", ".", cwd=tmp_path)
    files = {f["file"] for f in json.loads(run.out)["findings"]}
    assert files and not any("scratch" in str(f) for f in files)
    assert "repo/scratch: skipped, excluded" in run.err
    (tmp_path / "repo" / "manifests" / ".gpupolicyignore").write_text("/train.yaml\n")
    run = gpupolicy("lint", "--policies", str(POLICY), "-o", "json", ".", cwd=tmp_path)
    files = {f["file"] for f in json.loads(run.out)["findings"]}
    assert "repo/manifests/dra-pod.yaml" in files and "repo/manifests/train.yaml" not in files


def test_an_overlay_whose_resources_are_missing_is_one_error_however_it_is_named(
        tmp_path: Path) -> None:
    """A partial checkout: kustomize says the resource is missing, once for the overlay,
    whether the overlay is named, its files one by one (pre-commit), or a folder above it;
    its files are never read raw, and the rest is linted."""
    overlay = tmp_path / "deploy" / "gpu"
    (overlay / "patches").mkdir(parents=True)
    (overlay / "kustomization.yaml").write_text(
        "resources:\n- missing-deployment.yaml\npatches:\n- path: patches/gpus.yaml\n")
    (overlay / "patches" / "gpus.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n")
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n"
        "  - name: c\n    image: i\n    resources:\n      limits:\n"
        "        nvidia.com/gpu: 99\n")
    for named in (["deploy/gpu"], ["deploy/gpu/kustomization.yaml",
                                   "deploy/gpu/patches/gpus.yaml", "pod.yaml"], ["."]):
        run = gpupolicy("lint", "-o", "json", *named, cwd=tmp_path)
        assert run.code == 2, run.err
        (line,) = run.err.splitlines()
        assert line.startswith("gpupolicy lint: deploy/gpu: kustomize build failed (exit 1): ")
        assert "missing-deployment.yaml" in line
        report = json.loads(run.out)
        assert not any(f["file"].startswith("deploy/") for f in report["findings"])
        # the overlay, never rendered, is no file linted; pod.yaml is one
        assert report["summary"]["files"] == (0 if named == ["deploy/gpu"] else 1)


def test_a_namespace_an_overlay_renders_counts_for_the_plain_files_too(tmp_path: Path) -> None:
    """The files are linted while the tools run, with what the files say of the cluster; an
    overlay whose output adds to that (here the labels of a Namespace a policy selects by)
    has them linted again with it."""
    overlay = tmp_path / "namespaces"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text("resources:\n- ml.yaml\n")
    (overlay / "ml.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: ml\n"
        "  labels: {gpu-tier: audit}\n")
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: ml\nspec:\n"
        "  containers:\n  - name: c\n    image: i\n    resources:\n      limits:\n"
        "        nvidia.com/gpu: 4\n")
    policies = ROOT / "tests" / "lint" / "fixtures" / "policies" / "teams.yaml"
    run = gpupolicy("lint", "--policies", str(policies), "-o", "json", ".", cwd=tmp_path)
    assert run.code == 0, run.err
    found = {(f["file"], f["rule"]) for f in json.loads(run.out)["findings"]}
    assert ("pod.yaml", "gpu-max-per-container") in found  # the `audited` policy, by label


# A lint of the repository in its own process; each tool's start notes whether the engine
# (pydantic, which its policies are built with) was loaded yet.
STARTS = """
import sys
from webhook import cli
from webhook.inputs import render
real = render.Running.__init__
def started(self, argv, what, **kw):
    print(what, "with the engine" if "pydantic" in sys.modules else "before the engine",
          file=sys.__stdout__)
    real(self, argv, what, **kw)
render.Running.__init__ = started
import io
cli.run(["lint", sys.argv[1]], io.StringIO(), io.StringIO())
"""


def test_tools_start_before_the_engine_is_imported() -> None:
    """helm and kustomize run beside the engine's import (their own processes, on the other
    cores), not after it."""
    import subprocess

    env = {**os.environ, "PATH": f"{ROOT / 'tools' / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    tool("helm"), tool("kubectl")
    done = subprocess.run([sys.executable, "-c", STARTS, str(REPO)], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=120, check=True)
    assert sorted(done.stdout.splitlines()) == [
        "helm template before the engine", "kustomize build before the engine",
        "kustomize build before the engine"]
