"""`gpupolicy lint` on the fixture manifests: findings at known lines, every report format
(golden files; SARIF checked against the official 2.1.0 schema), exit codes and inputs."""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote

import jsonschema
import pytest

from tests.docs import documented
from tests.lint import sarif_rules
from tests.lint.helpers import GOLDEN, HERE, MANIFESTS, POLICIES, ROOT, gpupolicy, gpupolicy_process
from webhook.commands import lint
from webhook.output.report import FORMATS, ReportFinding, render

# file, line, column, rule, severity, policy: what the fixture manifests must give.
KNOWN = [
    ("broken/duplicate.yaml", 5, 3, "yaml-duplicate-key", "error", None),
    ("broken/tabs.yaml", 4, 1, "yaml-tab", "error", None),
    ("research.yml", 15, 13, "gpu-max-per-container", "warning", "audited"),
    ("team-list.yaml", 21, 7, "gpu-max-per-pod", "warning", "teams"),
    ("training.yaml", 20, 15, "gpu-max-per-container", "error", "training"),
    ("training.yaml", 47, 7, "visible-devices-bypass", "error", "training"),
]
MUTATIONS = [  # --show-mutations: at the parent of what would be added
    ("training.yaml", 14, 5, "/spec/template/spec/runtimeClassName"),
    ("training.yaml", 14, 5, "/spec/template/spec/tolerations"),
    ("training.yaml", 36, 1, "/spec/runtimeClassName"),
    ("training.yaml", 36, 1, "/spec/tolerations"),
    ("training.yaml", 40, 5, "/spec/containers/0/resources/limits"),
]
BASE = ("lint", "--policies", str(POLICIES), ".")


def _findings(*extra: str) -> list[dict[str, object]]:
    run = gpupolicy(*BASE, "--format", "json", *extra, cwd=MANIFESTS)
    assert run.code == 1, run.err
    return json.loads(run.out)["findings"]  # type: ignore[no-any-return]


def test_known_findings_at_known_lines() -> None:
    found = [(f["file"], f["line"], f["column"], f["rule"], f["severity"], f.get("policy"))
             for f in _findings()]
    assert sorted(found) == sorted(KNOWN)


def test_mutations_are_info_at_the_parent_field() -> None:
    found = [(f["file"], f["line"], f["column"], f["path"])
             for f in _findings("--show-mutations") if f["severity"] == "info"]
    assert sorted(found) == sorted(MUTATIONS)


@pytest.mark.parametrize("fmt", FORMATS)
def test_golden(fmt: str) -> None:
    """One expected report per format; GPUPOLICY_UPDATE_GOLDEN=1 rewrites them."""
    run = gpupolicy(*BASE, "--show-mutations", "--format", fmt, "--color", "never",
                    cwd=MANIFESTS)
    assert run.code == 1
    golden = GOLDEN / f"report.{fmt}"
    # the checkout's own place on disk is the one thing that differs between machines
    out = run.out.replace(ROOT.as_uri(), "file:///REPOSITORY")
    if os.environ.get("GPUPOLICY_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(out)
    assert out == golden.read_text()


def _sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)  # type: ignore[no-any-return]


@pytest.mark.parametrize("extra", [(), ("--show-mutations",)])
def test_sarif_validates_against_the_2_1_0_schema(extra: tuple[str, ...]) -> None:
    run = gpupolicy(*BASE, "--format", "sarif", *extra, cwd=MANIFESTS)
    log = json.loads(run.out)
    errors = list(_sarif_validator().iter_errors(log))
    assert errors == [], [e.message for e in errors]
    assert sarif_rules.problems(log) == []
    driver = log["runs"][0]["tool"]["driver"]
    rules = {r["id"]: r for r in driver["rules"]}
    results = log["runs"][0]["results"]
    for result in results:  # what GitHub code scanning needs of every result
        assert driver["rules"][result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        artifact = location["artifactLocation"]
        # relative to the repository root that originalUriBaseIds names, whatever the cwd
        assert artifact["uriBaseId"] == "%SRCROOT%"
        assert (ROOT / unquote(artifact["uri"])).is_file()
        assert location["region"]["startLine"] >= 1
        assert result["partialFingerprints"]
    assert log["runs"][0]["originalUriBaseIds"]["%SRCROOT%"]["uri"] == ROOT.as_uri() + "/"
    for rule in rules.values():  # each rule links to where the docs document it
        assert documented(rule["helpUri"]), rule["helpUri"]
    assert "maxGPUsPerContainer" in rules["gpu-max-per-container"]["help"]["text"]
    assert rules["yaml-duplicate-key"]["help"]["text"]


def test_sarif_leaves_out_findings_without_a_file() -> None:
    """The audit reuses the formatter for cluster objects, which have no file: GitHub rejects
    a whole upload for one result without a physical location, so such a finding is left
    out (the caller says so)."""
    findings = [ReportFinding("gpu-max-per-pod", "warning", "too many", object="Pod a/b"),
                ReportFinding("yaml-syntax", "error", "bad", file="dir with space/x.yaml")]
    log = json.loads(render("sarif", findings, rule_help={}))
    assert list(_sarif_validator().iter_errors(log)) == []
    assert sarif_rules.problems(log) == []
    by_rule = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    assert "gpu-max-per-pod" not in by_rule
    assert by_rule["yaml-syntax"]["locations"][0]["physicalLocation"][
        "artifactLocation"]["uri"] == "dir%20with%20space/x.yaml"


def test_junit_is_well_formed() -> None:
    run = gpupolicy(*BASE, "--format", "junit", cwd=MANIFESTS)
    root = ET.fromstring(run.out)
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {"broken/duplicate.yaml", "broken/tabs.yaml", "namespaces.yaml",
                           "research.yml", "team-list.yaml", "training.yaml", "web.json"}
    assert root.get("failures") == "4"
    assert suites["training.yaml"].get("failures") == "2"
    assert suites["research.yml"].get("failures") == "0"  # Audit mode: a warning


def test_github_annotations() -> None:
    run = gpupolicy(*BASE, "--format", "github", cwd=MANIFESTS)
    lines = run.out.splitlines()
    assert "::error file=training.yaml,line=20,col=15,title=gpu-max-per-container (training)::" \
        'container "main" asks for 3 nvidia.com/gpu; at most 2 allowed ' \
        "[spec.template.spec.containers[0].resources.limits['nvidia.com/gpu']]" in lines
    assert sum(line.startswith("::warning ") for line in lines) == 2


def test_github_escapes_newlines_and_separators() -> None:
    finding = ReportFinding("r", "info", "a\nb%c", file="x,y:z.yaml", line=1, column=2)
    assert render("github", [finding]) == \
        "::notice file=x%2Cy%3Az.yaml,line=1,col=2,title=r::a%0Ab%25c\n"


@pytest.mark.parametrize(("argv", "code", "stderr"), [
    (("lint", "web.json"), 0, ""),
    (("lint", "--policies", "../policies", "research.yml"), 0, ""),  # Audit only: warning
    (("lint", "--policies", "../policies", "training.yaml"), 1, ""),
    (("lint", "broken/tabs.yaml"), 1, ""),
    (("lint", "missing.yaml"), 2, "missing.yaml: no such file or directory"),
    (("lint",), 2, "no input"),
    (("lint", "--format", "xml", "web.json"), 2, ""),  # argparse says why on sys.stderr
    (("lint", "--policies", "web.json", "web.json"), 2, "web.json"),
    (("lint", "--fix", "-"), 2, "--fix cannot write to standard input"),
    (("lint", "--fix", "--fix-dry-run", "web.json"), 2, ""),
    (("lint", "--output-file", "web.json/r.json", "web.json"), 2, "cannot write"),
])
def test_exit_codes(argv: tuple[str, ...], code: int, stderr: str) -> None:
    run = gpupolicy(*argv, cwd=MANIFESTS)
    assert run.code == code, run.err
    assert stderr in run.err


def test_unreadable_paths_are_usage_errors(tmp_path: Path) -> None:
    """Exit 2, with the reason, for a path that exists but cannot be read."""
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "gone.yaml")
    run = gpupolicy("lint", str(tmp_path / "dangling.yaml"))
    assert run.code == 2 and "no such file" in run.err.lower()
    run = gpupolicy("lint", "/proc/self/mem")  # a regular file whose read fails, even as root
    assert run.code == 2 and "cannot read" in run.err


def test_one_unreadable_file_does_not_stop_the_directory(tmp_path: Path) -> None:
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")  # unreadable, even for root
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
        "  - {name: c, image: i, resources: {limits: {nvidia.com/gpu: '0.5'}}}\n")
    run = gpupolicy("lint", "-o", "json", str(tmp_path))
    assert run.code == 2  # unreadable input, said on stderr...
    assert "loop.yaml: cannot read" in run.err and "Traceback" not in run.err
    found = json.loads(run.out)["findings"]  # ...and the rest is still linted
    assert {(Path(f["file"]).name, f["rule"]) for f in found} == {
        ("pod.yaml", "gpu-quantity-not-integer")}


def test_output_file_and_verbose_notes(tmp_path: Path) -> None:
    out = tmp_path / "report.sarif"
    run = gpupolicy(*BASE, "--format", "sarif", "--output-file", str(out), "-v", cwd=MANIFESTS)
    assert run.code == 1 and run.out == ""
    assert json.loads(out.read_text())["version"] == "2.1.0"
    assert "training.yaml: document 4 (line 50): skipped, not a Kubernetes object" in run.err


def test_namespace_documents_among_inputs_drive_selectors() -> None:
    """research.yml is governed by `audited` only through namespaces.yaml's labels."""
    alone = gpupolicy("lint", "--policies", str(POLICIES), "--format", "json", "research.yml",
                      cwd=MANIFESTS)
    both = gpupolicy("lint", "--policies", str(POLICIES), "--format", "json", "research.yml",
                     "namespaces.yaml", cwd=MANIFESTS)
    assert json.loads(alone.out)["findings"] == []
    assert [f["rule"] for f in json.loads(both.out)["findings"]] == ["gpu-max-per-container"]


@pytest.mark.parametrize(("text", "read"), [
    (b"kind: Namespace\n", True),
    (b'{"kind": "ResourceClaimTemplate"}', True),
    (b"items:\n- {kind: 'DeviceClass'}\n", True),
    (b"spec:\n  targetNamespace: ml\n  NamespaceSelector: {}\n", False),
    (b"kind: Deployment\n", False),
])
def test_only_files_naming_a_cluster_kind_are_read_ahead(text: bytes, read: bool,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The files read before the lint, for Namespace labels and DRA claims and classes, are
    those that name such a kind as a word; a longer name that holds one is not a reason."""
    seen: list[bytes] = []
    real = lint.yamlpos.iter_stream
    monkeypatch.setattr(lint.yamlpos, "iter_stream", lambda raw: seen.append(raw) or real(raw))
    lint.documents_among([("x.yaml", text)])
    assert seen == ([text] if read else [])


def test_files_named_one_by_one_look_for_their_chart_once_a_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pre-commit names every file: the chart a file is in is looked for once per folder,
    and a link is looked up for itself (it may point into another chart)."""
    (tmp_path / "chart" / "templates").mkdir(parents=True)
    (tmp_path / "chart" / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (tmp_path / "loose").mkdir()
    for name in ("chart/templates/a.yaml", "chart/templates/b.yaml", "loose/c.yaml",
                 "loose/d.yaml"):
        (tmp_path / name).write_text("kind: ConfigMap\napiVersion: v1\n")
    (tmp_path / "loose" / "link.yaml").symlink_to(tmp_path / "chart" / "templates" / "a.yaml")
    asked: list[Path] = []
    real = lint.discover.enclosing
    monkeypatch.setattr(lint.discover, "enclosing",
                        lambda p, **kw: asked.append(p) or real(p, **kw))
    monkeypatch.chdir(tmp_path)
    got = lint.collect(["chart/templates/a.yaml", "chart/templates/b.yaml", "loose/c.yaml",
                        "loose/d.yaml", "loose/link.yaml"], stdin_name="-")
    assert [t.path for t in got.targets] == [Path("chart")]
    assert [name for name, _ in got.inputs] == ["loose/c.yaml", "loose/d.yaml"]
    assert got.notes == ["chart/templates/a.yaml: part of chart, rendered whole"]
    assert asked == [Path("chart/templates/a.yaml"), Path("loose/c.yaml"),
                     Path("loose/link.yaml")]


def test_the_heap_is_frozen_only_while_files_are_linted() -> None:
    """Collection leaves the long-lived objects alone during the lint, then is as it was;
    what an earlier freeze held (the cli freezes a command's import) stays frozen."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    for frozen_before in (False, True):
        if frozen_before:
            gc.freeze()
        before = gc.get_freeze_count()
        with lint.heap_frozen():
            during = gc.get_freeze_count()
            assert gc.get_threshold()[0] >= 10_000
        assert during > 0 and gc.isenabled()
        assert (gc.get_freeze_count() >= before > 0) if frozen_before else (
            gc.get_freeze_count() == 0)
        assert gc.get_threshold() == thresholds
    gc.disable()  # a caller that manages collection itself is left to it
    try:
        gc.unfreeze()
        with lint.heap_frozen():
            assert gc.get_freeze_count() == 0
    finally:
        gc.enable()


def test_namespace_option_and_stdin() -> None:
    """`helm template … | gpupolicy lint -`: positions are those of the stream."""
    text = (MANIFESTS / "team-list.yaml").read_bytes().replace(b"namespace: team-a", b"")
    run = gpupolicy_process("lint", "--policies", str(POLICIES), "--namespace", "team-b",
                            "--format", "json", "--stdin-filename", "rendered.yaml", "-",
                            stdin=text)
    findings = json.loads(run.out)["findings"]
    assert run.code == 0, run.err
    assert [(f["file"], f["line"], f["rule"], f["object"]) for f in findings] == [
        ("rendered.yaml", 21, "gpu-max-per-pod", "Pod team-b/big")]


def test_directories_are_walked_in_order_skipping_hidden(tmp_path: Path) -> None:
    shutil.copytree(MANIFESTS, tmp_path / "m")
    hidden = tmp_path / "m" / ".git"
    hidden.mkdir()
    (hidden / "x.yaml").write_text("a: [\n")
    run = gpupolicy("lint", "--format", "junit", str(tmp_path / "m"))
    names = [s.get("name") for s in ET.fromstring(run.out).iter("testsuite")]
    assert names == sorted(names) and len(names) == 7
    assert not any(".git" in n for n in names)


def test_text_is_coloured_only_when_asked() -> None:
    plain = gpupolicy(*BASE, cwd=MANIFESTS)
    coloured = gpupolicy(*BASE, "--color", "always", cwd=MANIFESTS)
    assert "\033[" not in plain.out
    assert "\033[31merror" in coloured.out
    assert plain.out.splitlines()[-1] == "6 problems (4 errors, 2 warnings) in 7 files"


def test_fast_path_imports_nothing_heavy() -> None:
    code = (
        "import io, sys; from webhook import cli\n"
        f"cli.run(['lint', {str(MANIFESTS / 'training.yaml')!r}], io.StringIO(), io.StringIO())\n"
        "heavy = {'flask', 'kubernetes', 'ruamel', 'jsonpatch', 'gunicorn', 'prometheus_client'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    import subprocess

    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=HERE.parents[1], check=True)
    assert done.stdout.strip() == "[]"


def test_pre_commit_hooks_run(tmp_path: Path) -> None:
    """Each hook's entry, with file names appended as pre-commit does, is a working command."""
    import yaml

    hooks = yaml.safe_load((HERE.parents[1] / ".pre-commit-hooks.yaml").read_text())
    assert {h["id"] for h in hooks} == {"gpupolicy-lint", "gpupolicy-fix",
                                         "gpupolicy-policy-check"}
    shutil.copytree(MANIFESTS, tmp_path / "m")
    files = {"gpupolicy-policy-check": [str(POLICIES / "training.yaml")]}
    for hook in hooks:
        assert hook["language"] == "python" and hook["entry"].startswith("gpupolicy ")
        argv = hook["entry"].split()[1:] + files.get(hook["id"], [str(tmp_path / "m")])
        assert gpupolicy(*argv).code in (0, 1), hook["id"]


def test_junit_survives_characters_xml_cannot_hold() -> None:
    finding = ReportFinding("r", "error", "bad \x1b[31m <&> \"q\" 'a'\n\tb", file="f.yaml",
                            line=1)
    root = ET.fromstring(render("junit", [finding], files=["f.yaml"]))
    failure = next(root.iter("failure"))
    assert failure.get("message") == "bad \ufffd[31m <&> \"q\" 'a'\n\tb"


@pytest.mark.parametrize(("inventory", "rules"), [
    ((), []),  # without nodes the catalog stands in: 50 whole GPUs are not a catalog error
    (("--inventory", "tests/engine/fixtures/nodes.yaml"), ["gpu-no-matching-hardware"]),
])
def test_inventory_option(tmp_path: Path, inventory: tuple[str, ...], rules: list[str]) -> None:
    pod = tmp_path / "huge.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: huge}\nspec:\n  containers:\n"
                   "  - name: c\n    image: cuda\n    resources:\n      limits:\n"
                   "        nvidia.com/gpu: 50\n")
    run = gpupolicy("lint", *inventory, "--format", "json", str(pod), cwd=HERE.parents[1])
    findings = json.loads(run.out)["findings"]
    assert [f["rule"] for f in findings] == rules
    assert run.code == (1 if rules else 0)
    if rules:
        assert (findings[0]["line"], findings[0]["path"]) == (5, "spec.containers")
        # The closest pools (fewest failed checks) are named, the others counted.
        assert "pool t4: not enough nvidia.com/gpu" in findings[0]["message"]
        assert "2 other pools fail too" in findings[0]["message"]


def test_a_mutation_is_credited_to_the_policy_that_made_it(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: injects}\n"
        "spec: {inject: {runtimeClassName: nvidia}}\n---\n"
        "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: rules-only}\n"
        "spec: {rules: {maxGPUsPerPod: 8}}\n")
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                   "  - {name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}\n")
    run = gpupolicy("lint", "--policies", str(policies), "--show-mutations", "-o", "json",
                    str(pod))
    mutations = [f for f in json.loads(run.out)["findings"] if f["rule"] == "mutation"]
    assert [(f["policy"], f["path"]) for f in mutations] == [("injects", "/spec/runtimeClassName")]
    audited = gpupolicy("audit", "--policies", str(policies), "-o", "json", str(pod))
    rows = {r["policy"]: r["mutate"] for r in json.loads(audited.out)["policies"]}
    assert rows == {"injects": 1, "rules-only": 0}
