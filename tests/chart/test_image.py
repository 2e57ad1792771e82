"""The container image, checked statically (no Docker daemon here): Dockerfile rules from the
issue, and that the chart's `helm test` script at least compiles."""

from __future__ import annotations

import py_compile
import re
from pathlib import Path

import pytest

from tests.chart.helm import CHART, ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")
STAGES = re.split(r"(?m)^FROM ", DOCKERFILE)[1:]
FINAL = STAGES[-1]


@pytest.mark.parametrize(
    ("pattern", "where"),
    [
        (r"ARG PYTHON_IMAGE=python:3\.\d+-slim", DOCKERFILE),
        (r"(?m)^USER 10001:10001$", FINAL),
                (r'(?m)^ENTRYPOINT \["gpupolicy"\]$', FINAL),
        (r'(?m)^CMD \["serve"', FINAL),
        (r"(?m)^COPY --from=build /opt/gpupolicy /opt/gpupolicy$", FINAL),
        (r"(?m)^EXPOSE 8443 9090$", FINAL),
        # Probes and the HEALTHCHECK use the plain-HTTP metrics listener, not the TLS port.
        (r"(?m)^HEALTHCHECK .*\n?.*'http://127\.0\.0\.1:9090/healthz'", FINAL),
        (r'(?m)^CMD \["serve", "--port=8443", "--metrics-port=9090"', FINAL),
        (r"(?m)^STOPSIGNAL SIGTERM$", FINAL),
        # The base reference (a digest in release builds) is recorded in the image.
        (r'org\.opencontainers\.image\.base\.name="\$\{PYTHON_IMAGE\}"', FINAL),
        (r"find / -xdev -type f -perm /6000 -exec chmod a-s", FINAL),
        # How to pin the base by digest is written where the build is.
        (r"--build-arg PYTHON_IMAGE=python:3\.\d+-slim-bookworm@\$digest", DOCKERFILE),
    ],
)
def test_dockerfile_has(pattern: str, where: str) -> None:
    assert re.search(pattern, where)


def test_every_stage_builds_from_the_one_base_argument() -> None:
    """A digest passed as PYTHON_IMAGE pins both stages: no FROM names a tag of its own."""
    froms = re.findall(r"(?m)^FROM (\S+)", DOCKERFILE)
    assert froms == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]



@pytest.mark.parametrize("tool", ["gcc", "build-essential", "apt-get install", "make "])
def test_no_build_tools_in_the_image(tool: str) -> None:
    assert tool not in DOCKERFILE


def test_two_stages_and_the_final_one_has_no_sources() -> None:
    assert len(STAGES) == 2
    assert "COPY policies" not in FINAL and "COPY webhook" not in FINAL


def test_dockerignore_allows_only_the_package() -> None:
    lines = [line for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
             if line and not line.startswith("#")]
    assert lines[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!policies/", "!webhook/"} <= set(lines)


def test_image_user_matches_the_chart() -> None:
    values = (CHART / "values.yaml").read_text(encoding="utf-8")
    assert "runAsUser: 10001" in values and "runAsGroup: 10001" in values


def test_helm_test_script_compiles(tmp_path: Path) -> None:
    py_compile.compile(str(CHART / "files" / "helm_test.py"),
                       cfile=str(tmp_path / "helm_test.pyc"), doraise=True)
