"""The image's supply chain, checked without Docker: requirements.lock agrees with
constraints.txt and covers every runtime dependency with hashes, the Dockerfile installs only
it (--require-hashes) and refuses a base image named by tag alone, and `make sbom` writes valid
CycloneDX listing exactly what the image holds."""

from __future__ import annotations

import json
import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tools import sbom

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
LOCKED = sbom.locked()
RUNTIME = {name: version for name, (version, build_only) in LOCKED.items() if not build_only}


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        name, eq, version = line.partition("==")
        if eq and not line.startswith("#"):
            pins[sbom.normalize(name)] = version.strip()
    return pins


def _closure(requirements: list[str]) -> set[str]:
    """Every distribution those requirements pull in, as installed here (the same versions:
    make installs with constraints.txt)."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = sbom.normalize(req.name)
        if name in seen:
            continue
        seen.add(name)
        todo += [Requirement(r) for r in metadata.requires(req.name) or []]
    return seen


def test_the_lock_pins_what_constraints_pins() -> None:
    constraints = _constraints()
    differ = {name: (version, constraints.get(name)) for name, version in RUNTIME.items()
              if constraints.get(name) != version}
    assert not differ, f"requirements.lock vs constraints.txt (run `make lock`): {differ}"


def test_the_lock_holds_every_runtime_dependency_and_nothing_else() -> None:
    wanted = _closure(PYPROJECT["project"]["dependencies"])
    assert set(RUNTIME) == wanted


def test_build_only_packages_are_the_build_systems() -> None:
    build = {Requirement(r).name: Requirement(r) for r in PYPROJECT["build-system"]["requires"]}
    only = {name: version for name, (version, build_only) in LOCKED.items() if build_only}
    assert set(only) == set(build)
    for name, version in only.items():
        assert build[name].specifier.contains(version)


def test_every_pin_carries_hashes() -> None:
    text = (ROOT / "requirements.lock").read_text(encoding="utf-8")
    blocks = re.split(r"(?m)^(?=[A-Za-z0-9])", text)[1:]
    assert len(blocks) == len(LOCKED)
    for block in blocks:
        assert re.search(r"--hash=sha256:[0-9a-f]{64}", block), block.splitlines()[0]


@pytest.mark.parametrize("pattern", [
    r"pip install --require-hashes --only-binary=:all: --no-deps \\\n\s+-r requirements\.lock",
    r"pip install --no-deps --no-index --no-build-isolation \.",
    r"pip uninstall --yes setuptools pip",
    r"(?m)^COPY pyproject\.toml README\.md requirements\.lock \./$",
])
def test_the_image_installs_the_lock_only(pattern: str) -> None:
    assert re.search(pattern, DOCKERFILE)
    assert "constraints.txt" not in DOCKERFILE


def test_the_base_check_runs_before_anything_is_installed() -> None:
    build = re.split(r"(?m)^FROM ", DOCKERFILE)[1]
    check = build.index('RUN sh /usr/local/bin/pinned_base.sh "$PYTHON_IMAGE" '
                        '"$ALLOW_UNPINNED_BASE"')
    assert check < build.index("pip install")
    assert re.search(r"(?m)^ARG PYTHON_IMAGE$", build[:check])
    assert re.search(r"(?m)^ARG ALLOW_UNPINNED_BASE=0$", build[:check])
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert {"!requirements.lock", "!tools/pinned_base.sh"} <= set(ignored)


DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(("image", "allow", "code", "says"), [
    (f"python:3.11-slim-bookworm@{DIGEST}", "0", 0, ""),
    (f"registry.example:5000/python@{DIGEST}", "0", 0, ""),
    ("python:3.11-slim-bookworm", "0", 1, "not pinned by digest"),
    ("python:3.11-slim-bookworm", "", 1, "not pinned by digest"),
    ("python:3.11-slim-bookworm", "1", 0, "warning"),
    (f"python:3.11-slim-bookworm@{DIGEST[:-1]}", "0", 1, "not pinned"),
    (f"python:3.11@{DIGEST.upper().replace('SHA256', 'sha256')}", "0", 1, "not pinned"),
    (f"python:3.11@{DIGEST} extra", "0", 1, "not pinned"),
    ("", "0", 1, "not pinned"),
], ids=["digest", "registry-digest", "tag", "tag-allow-empty", "tag-allowed", "short-digest",
        "upper-hex", "trailing-word", "empty"])
def test_an_unpinned_base_is_refused(image: str, allow: str, code: int, says: str) -> None:
    done = subprocess.run(["sh", str(ROOT / "tools" / "pinned_base.sh"), image, allow],
                          capture_output=True, text=True, check=False)
    assert done.returncode == code
    assert says in done.stderr


@pytest.fixture(scope="module")
def bom(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("sbom") / "sbom.cdx.json"
    assert sbom.main([str(out)]) == 0
    loaded: dict[str, object] = json.loads(out.read_text(encoding="utf-8"))
    return loaded


def test_the_sbom_is_valid_cyclonedx(bom: dict[str, object]) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert bom["bomFormat"] == "CycloneDX" and bom["specVersion"] == sbom.SPEC_VERSION
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(bom))
    assert error is None, error


def test_the_sbom_lists_what_the_image_holds(bom: dict[str, object]) -> None:
    """The runtime dependencies at their locked versions, with package URLs and hashes;
    gpupolicy as the root; nothing the image removes (setuptools)."""
    components = bom["components"]
    assert isinstance(components, list)
    listed = {sbom.normalize(c["name"]): c for c in components}
    assert {name: c["version"] for name, c in listed.items()} == RUNTIME
    for name, c in listed.items():
        assert c["purl"] == f"pkg:pypi/{name}@{RUNTIME[name]}"
        hashes = [h for ref in c["externalReferences"] for h in ref.get("hashes", [])]
        assert hashes and all(h["alg"] == "SHA-256" for h in hashes)
    root = bom["metadata"]["component"]  # type: ignore[index]
    assert (root["name"], root["version"]) == ("gpupolicy", PYPROJECT["project"]["version"])
