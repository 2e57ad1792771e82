"""`gpupolicy test`: GPUPolicyTest suites from real files -> the lines a user reads and the exit
code (0 all pass, 1 a case fails, 2 an invalid suite or a case that cannot run)."""

from __future__ import annotations

import io
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from webhook import cli

ROOT = Path(__file__).resolve().parents[2]

NODES = """\
apiVersion: v1
kind: Node
metadata:
  name: a100-0
  labels: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB, nvidia.com/gpu.count: "8"}
spec:
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
status:
  allocatable: {cpu: "96", memory: 1Ti, nvidia.com/gpu: "8", pods: "110"}
"""
PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: gpu, namespace: ml}
spec:
  containers:
    - {name: main, image: cuda, resources: {requests: {nvidia.com/gpu: 2}}}
---
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: ml}
spec:
  containers:
    - {name: main, image: cuda, resources: {limits: {nvidia.com/gpu: 16}}}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: web, image: nginx}]
"""
HEADER = """\
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicyTest
metadata: {name: unit}
inventory: nodes.yaml
resources: [pods.yaml]
"""
PASSING = """\
cases:
  - resource: Pod/ml/gpu
    allowed: true
    rules: []
    mutates: true
    patched:
      /spec/tolerations/0/key: nvidia.com/gpu
      /spec/containers/0/resources/limits/nvidia.com~1gpu: 2
  - resource: Pod/ml/huge
    allowed: false
    rulesInclude: [gpu-no-matching-hardware]
    rulesExclude: [gpu-max-per-pod]
  - resource: Pod/web
    allowed: true
    mutates: false
"""


def write(directory: Path, suite: str, name: str = "suite.yaml") -> Path:
    (directory / "nodes.yaml").write_text(NODES)
    (directory / "pods.yaml").write_text(PODS)
    path = directory / name
    path.write_text(suite)
    return path


def gpupolicy(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["test", *args], out, err)
    return code, out.getvalue(), err.getvalue()


def case(body: str) -> str:
    return HEADER + "cases:\n" + body


def test_passing_suite(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + PASSING)
    code, out, err = gpupolicy(str(path))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"unit ({path})",
        "  PASS  Pod/ml/gpu",
        "  PASS  Pod/ml/huge",
        "  PASS  Pod/web",
        "3 cases in 1 suite: 3 passed, 0 failed, 0 errors",
    ]


# Each kind of failure: the case as written -> the lines under FAIL (exit 1).
FAILURES = [
    ("allowed", "  - {resource: Pod/ml/huge, allowed: true}\n",
     ['allowed: expected true, got false (gpu-no-matching-hardware at spec.containers: '
      'no node can run this pod']),
    ("rules", "  - {resource: Pod/ml/huge, rules: [gpu-max-per-pod]}\n",
     ["rules: expected [gpu-max-per-pod], got [gpu-no-matching-hardware]; did not fire: "
      "gpu-max-per-pod; also fired: gpu-no-matching-hardware"]),
    ("rules none", "  - {resource: Pod/ml/gpu, rules: [gpu-no-matching-hardware]}\n",
     ["rules: expected [gpu-no-matching-hardware], got []; did not fire: "
      "gpu-no-matching-hardware"]),
    ("rulesInclude", "  - {resource: Pod/ml/gpu, rulesInclude: [privileged-gpu-container]}\n",
     ["rulesInclude: expected [privileged-gpu-container] to fire, privileged-gpu-container "
      "did not; got []"]),
    ("rulesExclude", "  - {resource: Pod/ml/huge, rulesExclude: [gpu-no-matching-hardware]}\n",
     ["rulesExclude: gpu-no-matching-hardware fired: gpu-no-matching-hardware"]),
    ("mutates", "  - {resource: Pod/web, mutates: true}\n", ["mutates: expected true, got false"]),
    ("mutates ops", "  - {resource: Pod/ml/gpu, mutates: false}\n",
     ["mutates: expected false, got true (add /spec/containers/0/resources/limits, "
      "add /spec/tolerations)"]),
    ("patched value", '  - {resource: Pod/ml/gpu, patched: {/spec/tolerations/0/key: "gpu"}}\n',
     ['patched /spec/tolerations/0/key: expected "gpu", got "nvidia.com/gpu"']),
    ("patched absent", "  - {resource: Pod/ml/gpu, patched: {/spec/runtimeClassName: nvidia}}\n",
     ['patched /spec/runtimeClassName: expected "nvidia", got (not set)']),
    ("patched type", '  - resource: Pod/ml/gpu\n'
     '    patched: {/spec/containers/0/resources/limits/nvidia.com~1gpu: "2"}\n',
     ['patched /spec/containers/0/resources/limits/nvidia.com~1gpu: expected "2", got 2']),
    ("patched index", "  - {resource: Pod/web, patched: {/spec/containers/5/name: web}}\n",
     ['patched /spec/containers/5/name: expected "web", got (not set)']),
    ("two at once", "  - {resource: Pod/ml/huge, allowed: true, mutates: false}\n",
     ["allowed: expected true, got false", "mutates: expected false, got true"]),
]


@pytest.mark.parametrize(("body", "expected"), [f[1:] for f in FAILURES],
                         ids=[f[0] for f in FAILURES])
def test_failing_case(tmp_path: Path, body: str, expected: list[str]) -> None:
    path = write(tmp_path, case(body))
    code, out, err = gpupolicy(str(path))
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[1].startswith("  FAIL  Pod/")
    details = [line.strip() for line in lines[2:-1]]
    assert len(details) == len(expected)
    for got, want in zip(details, expected, strict=True):
        assert got.startswith(want), (got, want)
    assert lines[-1] == "1 case in 1 suite: 0 passed, 1 failed, 0 errors"


def test_resource_not_found_is_an_error_not_a_pass(tmp_path: Path) -> None:
    path = write(tmp_path, case("  - {resource: Pod/ml/gpu, allowed: true}\n"
                                "  - {resource: Pod/ml/gpu-typo, allowed: true}\n"
                                "  - {resource: Deployment/ml/gpu, allowed: true}\n"))
    code, out, _ = gpupolicy(str(path))
    assert code == 2
    lines = out.splitlines()
    assert lines[1:3] == ["  PASS  Pod/ml/gpu", "  ERROR Pod/ml/gpu-typo"]
    assert lines[3].strip() == (
        f"{path}:8: cases[1].resource: 'Pod/ml/gpu-typo' is not among the resources of the "
        "suite (found: Pod/ml/gpu, Pod/ml/huge, Pod/default/web)")
    assert lines[4] == "  ERROR Deployment/ml/gpu"
    assert lines[-1] == "3 cases in 1 suite: 1 passed, 0 failed, 2 errors"


# Invalid suites: exit 2, and the message names file, line and field.
INVALID = [
    ("unknown field", case("  - {resource: Pod/ml/gpu, alowed: true}\n"),
     ":7: cases[0].alowed: unknown field; did you mean allowed?"),
    ("bad apiVersion", HEADER.replace("gpupolicy.io/v1alpha1", "gpupolicy.io/v1") + PASSING,
     ":1: apiVersion: expected 'gpupolicy.io/v1alpha1', got 'gpupolicy.io/v1'"),
    ("missing resources file", HEADER.replace("[pods.yaml]", "[pods.yaml, gone.yaml]") + PASSING,
     "gone.yaml: no such file or directory"),
    ("missing policies file", HEADER + "policies: [nope/]\n" + PASSING,
     ":6: policies[0]: "),
    ("missing inventory", HEADER.replace("nodes.yaml", "nodes-gone.yaml") + PASSING,
     ":4: inventory: "),
    ("no resources field", HEADER.replace("resources: [pods.yaml]\n", "") + PASSING,
     ":1: resources: required field is missing"),
    ("no cases", HEADER + "cases: []\n", ":6: cases: must not be empty"),
    ("case expects nothing", case("  - {resource: Pod/ml/gpu}\n"),
     ":7: cases[0]: a case needs an expectation"),
    ("unknown rule id", case("  - {resource: Pod/ml/gpu, rules: [gpu-no-matching-hardwre]}\n"),
     ":7: cases[0].rules: unknown rule id 'gpu-no-matching-hardwre'"),
    ("rules and rulesInclude",
     case("  - {resource: Pod/ml/gpu, rules: [], rulesInclude: [gpu-max-per-pod]}\n"),
     ":7: cases[0]: give rules (exactly these) or rulesInclude"),
    ("not a pointer", case("  - {resource: Pod/ml/gpu, patched: {spec.tolerations: []}}\n"),
     ":7: cases[0].patched: 'spec.tolerations' is not a JSON pointer"),
    ("bad resource name", case("  - {resource: ml/gpu/x/y, allowed: true}\n"),
     ":7: cases[0].resource: expected KIND/NAMESPACE/NAME or KIND/NAME, got 'ml/gpu/x/y'"),
    ("allowed not a bool", case("  - {resource: Pod/ml/gpu, allowed: maybe}\n"),
     ':7: cases[0].allowed: must be a boolean (true or false), not string "maybe"'),
    ("allowed a string", case("  - {resource: Pod/ml/gpu, allowed: 'false'}\n"),
     ':7: cases[0].allowed: must be a boolean (true or false), not string "false"'),
    ("mutates a string", case("  - {resource: Pod/ml/gpu, mutates: 'yes'}\n"),
     ':7: cases[0].mutates: must be a boolean (true or false), not string "yes"'),
    ("duplicate key", case("  - {resource: Pod/ml/gpu, allowed: true, allowed: false}\n"),
     ":7:"),
]


@pytest.mark.parametrize(("suite", "message"), [i[1:] for i in INVALID],
                         ids=[i[0] for i in INVALID])
def test_invalid_suite(tmp_path: Path, suite: str, message: str) -> None:
    path = write(tmp_path, suite)
    code, out, err = gpupolicy(str(path))
    assert code == 2
    # said once, in the report, in file order and the user's words
    assert f"  ERROR {path}" in out and err == "", err
    assert message in out, out
    assert "Input should" not in out and "Traceback" not in err
    assert out.splitlines()[-1].endswith("0 passed, 0 failed, 1 error")
    # with the report elsewhere (JUnit, a file), stderr says it
    code, out, err = gpupolicy("-o", "junit", str(path))
    assert code == 2 and f"gpupolicy test: invalid suite: {path}" in err and message in err


def test_resource_given_twice(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER.replace("[pods.yaml]", "[pods.yaml, pods.yaml]") + PASSING)
    code, out, _ = gpupolicy(str(path))
    assert code == 2
    assert f"{path}:5: resources[1]: " in out and "Pod/ml/gpu is given twice" in out


@pytest.mark.parametrize(
    ("files", "args", "message"),
    [
        ({}, ["gone/"], "gone: no such file or directory"),
        ({"pods.yaml": PODS}, ["."], ".: no GPUPolicyTest suite found"),
        ({"pods.yaml": PODS}, [], ".: no GPUPolicyTest suite found"),
        ({"pods.yaml": PODS}, ["pods.yaml"], "pods.yaml: no GPUPolicyTest document"),
    ],
)
def test_paths_without_suites(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              files: dict[str, str], args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, out, err = gpupolicy(*args)
    assert code == 2
    assert message in out + err


def test_directory_runs_every_suite_and_policies_are_relative(tmp_path: Path) -> None:
    (tmp_path / "team").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "training.yaml").write_text("""\
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: training}
spec:
  namespaces: [ml]
  inject: {runtimeClassName: nvidia}
  rules: {maxGPUsPerPod: 1}
""")
    write(tmp_path / "team", HEADER.replace("inventory", "policies: [../policies]\ninventory")
          + "cases:\n  - {resource: Pod/ml/gpu, allowed: false, rules: [gpu-max-per-pod,\n"
                 "     gpu-request-without-limit],\n"
                 "     patched: {/spec/runtimeClassName: nvidia}}\n"
                 "  - {resource: Pod/web, allowed: true, mutates: false}\n")
    write(tmp_path, HEADER + PASSING, name="a-suite.yaml")
    code, out, _ = gpupolicy(str(tmp_path))
    assert code == 0, out
    assert out.splitlines()[-1] == "5 cases in 2 suites: 5 passed, 0 failed, 0 errors"


def test_exit_code_two_wins_over_one(tmp_path: Path) -> None:
    path = write(tmp_path, case("  - {resource: Pod/web, allowed: false}\n"
                                "  - {resource: Pod/nope, allowed: false}\n"))
    assert gpupolicy(str(path))[0] == 2


def _junit(text: str) -> ET.Element:
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    for suite in root:
        assert suite.tag == "testsuite"
        assert set(suite.attrib) == {"name", "tests", "failures", "errors", "skipped"}
        cases = list(suite)
        assert int(suite.get("tests", "")) == len(cases)
        assert int(suite.get("failures", "")) == len(suite.findall("testcase/failure"))
        assert int(suite.get("errors", "")) == len(suite.findall("testcase/error"))
        for test in cases:
            assert test.tag == "testcase" and test.get("classname") and test.get("name")
            for child in test:
                assert child.tag in ("failure", "error") and child.get("message")
    return root


def test_junit(tmp_path: Path) -> None:
    for name, body in (("a", PASSING),
                       ("b", "cases:\n  - {resource: Pod/web, allowed: false}\n"
                             "  - {resource: Pod/gone, allowed: true}\n")):
        (tmp_path / name).mkdir()
        write(tmp_path / name, HEADER + body)
    (tmp_path / "c").mkdir()
    write(tmp_path / "c", HEADER + "cases: []\n")
    code, out, _ = gpupolicy("--format", "junit", str(tmp_path))
    assert code == 2
    root = _junit(out)
    assert {k: root.get(k) for k in ("tests", "failures", "errors")} == {
        "tests": "6", "failures": "1", "errors": "2"}
    a, b, c = root
    assert [t.get("name") for t in a] == ["Pod/ml/gpu", "Pod/ml/huge", "Pod/web"]
    assert all(t.get("classname") == "unit" for t in a) and not a.findall("testcase/*")
    failure = b.find("testcase/failure")
    assert failure is not None
    assert failure.get("message") == "allowed: expected false, got true"
    error = b.find("testcase/error")
    assert error is not None and "'Pod/gone' is not among the resources" in (error.text or "")
    [invalid] = c.findall("testcase/error")
    assert "cases: must not be empty" in invalid.get("message", "")


def test_output_file(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER + PASSING)
    report = tmp_path / "junit.xml"
    code, out, _ = gpupolicy("-o", "junit", "--output-file", str(report), str(path))
    assert (code, out) == (0, "")
    assert _junit(report.read_text()).get("tests") == "3"


def test_bundled_policy_suite_passes() -> None:
    """The default policy ships with its suite; a real process, as CI runs it."""
    done = subprocess.run([sys.executable, "-m", "webhook.cli", "test", "policies/defaults-tests"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("  PASS  ") >= 9
    assert " 0 failed, 0 errors" in done.stdout.splitlines()[-1]


def test_bundled_suite_is_package_data() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"defaults-tests/*.yaml"' in pyproject
    assert all(p.suffix == ".yaml" for p in (ROOT / "policies" / "defaults-tests").iterdir())


def test_readme_suite_runs(tmp_path: Path) -> None:
    """The documented suite (docs/policies.md), with the files it names, passes as written."""
    section = (ROOT / "docs" / "policies.md").read_text().split("## Testing policies", 1)[1]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    where = tmp_path / "tests" / "training"
    where.mkdir(parents=True)
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "gpu.yaml").write_text(
        (ROOT / "policies" / "defaults" / "gpu-defaults.yaml").read_text())
    write(where, example)
    (where / "pods.yaml").write_text(PODS.replace("name: huge, namespace: ml",
                                                  "name: train-0, namespace: ml-train"))
    (where / "deploy.yaml").write_text("""\
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml-train}
spec:
  selector: {matchLabels: {app: t}}
  template:
    metadata: {labels: {app: t}}
    spec:
      containers: [{name: main, image: cuda, resources: {requests: {nvidia.com/gpu: 1}}}]
""")
    (where / "namespaces.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml-train, labels: {tier: gpu}}\n")
    code, out, err = gpupolicy(str(tmp_path / "tests"))
    assert (code, err) == (0, ""), out
    assert out.splitlines()[-1] == "3 cases in 1 suite: 3 passed, 0 failed, 0 errors"


@pytest.mark.parametrize(
    ("pods", "message"),
    [
        ("kind: Pod\nmetadata: {name: a}\nmetadata: {name: b}\n",
         "pods.yaml:3:1: duplicate key 'metadata'"),
        ("a: &x [*x]\n", "pods.yaml:1:"),
        ("kind: Pod\n\tmetadata: {}\n", "pods.yaml:2:"),
    ],
    ids=["duplicate key", "self alias", "tab"],
)
def test_resources_go_through_the_hardened_reader(tmp_path: Path, pods: str,
                                                  message: str) -> None:
    path = write(tmp_path, HEADER + PASSING)
    (tmp_path / "pods.yaml").write_text(pods)
    code, out, err = gpupolicy(str(path))
    assert code == 2
    assert f"{path}:5: resources[0]: " in out and message in out, out
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "code", "line"),
    [
        (["-f", "suite.yaml"], 0, "3 cases in 1 suite: 3 passed, 0 failed, 0 errors"),
        (["-o", "junit", "-f", "."], 0, '<testsuites name="gpupolicy test" tests="3" '
                                        'failures="0" errors="0">'),
        ([], 0, "  PASS  Pod/web"),  # the current directory
        (["-o", "report.xml", "."], 2, "-o report.xml: did you mean --output-file report.xml?"),
        (["-o", "sarif", "."], 2, "-o sarif: unknown format; choose one of text, json, junit"),
        (["-f", "junit"], 2, "'junit' is a format: did you mean -o junit"),
    ],
)
def test_cli_conventions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                         code: int, line: str) -> None:
    write(tmp_path, HEADER + PASSING)
    monkeypatch.chdir(tmp_path)
    got, out, err = gpupolicy(*args)
    assert got == code, out + err
    assert any(line in text for text in (out + err).splitlines()), out + err


def test_text_report_escapes_terminal_control_characters(tmp_path: Path) -> None:
    path = write(tmp_path, case('  - {resource: "Pod/ml/gpu\\e[31m", allowed: true}\n'))
    code, out, _ = gpupolicy(str(path))
    assert code == 2
    assert "\x1b" not in out and "Pod/ml/gpu\\x1b[31m" in out


# ---- DRA: claim templates among the resources or in the inventory; a claim as a case --------

DRA_INVENTORY = ROOT / "tests" / "cluster" / "data" / "dra.yaml"  # h100-1 (8 GPUs), 2 x L4 (2)
TEMPLATES = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: four, namespace: ml}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 4}}]}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: sixteen, namespace: ml}
spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 16}}]}}}
"""
CLAIM_PODS = """\
apiVersion: v1
kind: Pod
metadata: {name: fits, namespace: ml}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: four}]
  containers: [{name: c, image: cuda, resources: {claims: [{name: gpu}]}}]
---
apiVersion: v1
kind: Pod
metadata: {name: waits, namespace: ml}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: sixteen}]
  containers: [{name: c, image: cuda, resources: {claims: [{name: gpu}]}}]
"""
CLAIM_CASES = """\
cases:
  - {resource: Pod/ml/fits, allowed: true, rules: [], patched: {/spec/tolerations/0/key: nvidia.com/gpu}}
  - {resource: Pod/ml/waits, allowed: false, rules: [dra-no-matching-device]}
  - {resource: ResourceClaimTemplate/ml/sixteen, allowed: false, rules: [dra-no-matching-device], mutates: false}
  - {resource: ResourceClaimTemplate/ml/four, allowed: true, rules: []}
"""


@pytest.mark.parametrize(
    ("inventory", "resources"),
    [
        # the templates among the resources; the inventory is the DRA cluster alone
        ("dra.yaml", ["pods.yaml", "templates.yaml"]),
        # the templates in the inventory stream (kubectl get ...,resourceclaimtemplates)
        ("cluster.yaml", ["pods.yaml"]),
    ],
    ids=["templates-among-resources", "templates-in-inventory"],
)
def test_a_suite_judges_pods_with_claims_and_claims_themselves(
        tmp_path: Path, inventory: str, resources: list[str]) -> None:
    (tmp_path / "dra.yaml").write_text(DRA_INVENTORY.read_text(encoding="utf-8"))
    (tmp_path / "cluster.yaml").write_text(
        DRA_INVENTORY.read_text(encoding="utf-8") + "---\n" + TEMPLATES)
    (tmp_path / "templates.yaml").write_text(TEMPLATES)
    (tmp_path / "pods.yaml").write_text(CLAIM_PODS)
    cases = CLAIM_CASES
    if "templates.yaml" not in resources:  # only the suite's resources can be cases
        cases = "\n".join(line for line in cases.splitlines()
                          if "ResourceClaimTemplate/" not in line) + "\n"
    path = tmp_path / "suite.yaml"
    path.write_text("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicyTest\n"
                    f"metadata: {{name: dra}}\ninventory: {inventory}\n"
                    f"resources: [{', '.join(resources)}]\n" + cases)
    code, out, err = gpupolicy(str(path))
    assert (code, err) == (0, ""), out
    passed = [line.strip() for line in out.splitlines() if line.startswith("  PASS")]
    assert passed == [f"PASS  {line.split('resource: ')[1].split(',')[0]}"
                      for line in cases.splitlines() if "resource:" in line]


def test_load_errors_once_in_file_order(tmp_path: Path) -> None:
    path = write(tmp_path, HEADER.replace("inventory: nodes.yaml\n", "") + (
        "policies: []\ncases:\n  - {resource: Pod/ml/gpu, allowed: maybe}\n"))
    code, out, err = gpupolicy(str(path))
    assert code == 2 and err == ""
    errors = [int(line.split(f"{path}:", 1)[1].split(":", 1)[0]) for line in out.splitlines()
              if f"{path}:" in line]
    assert len(errors) >= 2 and errors == sorted(errors), out
    assert "cases: must not be empty" not in out  # the item's problem, not pydantic's echo


def test_a_lowercase_kind_names_the_resource_as_explain_does(tmp_path: Path) -> None:
    path = write(tmp_path, case("  - {resource: pod/ml/gpu, allowed: true}\n"
                                "  - {resource: POD/web, allowed: true}\n"))
    code, out, err = gpupolicy(str(path))
    assert (code, err) == (0, ""), out
    assert "  PASS  pod/ml/gpu" in out.splitlines()


def test_two_cases_on_one_resource_have_two_names(tmp_path: Path) -> None:
    path = write(tmp_path, case(
        "  - {resource: Pod/ml/gpu, allowed: true}\n"
        "  - {resource: Pod/ml/gpu, description: no rule fires, rules: []}\n"
        "  - {resource: Pod/ml/huge, allowed: false}\n"))
    code, out, _ = gpupolicy(str(path))
    assert code == 0, out
    assert out.splitlines()[1:4] == ["  PASS  Pod/ml/gpu (case 1)",
                                     "  PASS  Pod/ml/gpu (case 2: no rule fires)",
                                     "  PASS  Pod/ml/huge"]
    code, out, _ = gpupolicy("-o", "junit", str(path))
    names = [c.get("name") for c in ET.fromstring(out).iter("testcase")]
    assert len(names) == len(set(names)) == 3


def test_json_report(tmp_path: Path) -> None:
    import json

    path = write(tmp_path, HEADER + PASSING)
    code, out, _ = gpupolicy("-o", "json", str(path))
    body = json.loads(out)
    assert code == 0 and body["summary"]["passed"] == body["summary"]["tests"] >= 1
    assert body["suites"][0]["cases"][0]["status"] == "PASS"
