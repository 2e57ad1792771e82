"""`make sbom`: the CycloneDX SBOM (JSON) of the Python packages the image holds.

The image installs requirements.lock with `--require-hashes` (nothing else can come in), then
the package itself, then removes what only built it (the lock's build-system requirements,
and pip). So the image's Python packages are the lock's, less those, plus gpupolicy: the SBOM
is cyclonedx-py's reading of the lock (names, versions, hashes, package URLs), with gpupolicy
as its root component (from pyproject.toml) and the build-only packages dropped.

The base image's own packages (Debian, CPython) are the base image's: Docker's official images
publish their SBOM as an attestation (`docker buildx imagetools inspect <image>@<digest>
--format '{{json .SBOM}}'`).

usage: python tools/sbom.py [OUTPUT]   (default: sbom.cdx.json)
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
SPEC_VERSION = "1.6"
# pip-compile marks what it locked only to build the package itself.
_BUILD_ONLY = re.compile(r"build-system\.requires")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")


def locked(lock: Path = LOCK) -> dict[str, tuple[str, bool]]:
    """name (normalized) -> (version, build only) of every package in the lock."""
    found: dict[str, tuple[str, bool]] = {}
    name = ""
    for line in lock.read_text(encoding="utf-8").splitlines():
        pin = _PIN.match(line)
        if pin:
            name = normalize(pin.group(1))
            found[name] = (pin.group(2), True)  # until a runtime requirer is seen
            continue
        via = line.strip().removeprefix("#").strip()
        if (name and line.startswith("    #") and via and via != "via"
                and not _BUILD_ONLY.search(via) and not via.startswith("-c ")):
            found[name] = (found[name][0], False)
    return found


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build(out: Path, lock: Path = LOCK) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="gpupolicy-sbom-") as tmp:
        raw = Path(tmp) / "bom.json"
        subprocess.run(
            [sys.executable, "-m", "cyclonedx_py", "requirements", str(lock),
             "--pyproject", str(ROOT / "pyproject.toml"), "--mc-type", "application",
             "--sv", SPEC_VERSION, "--output-reproducible", "--of", "JSON", "-o", str(raw)],
            check=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        bom: dict[str, Any] = json.loads(raw.read_text(encoding="utf-8"))
    build_only = {name for name, (_, only) in locked(lock).items() if only}
    gone = {c["bom-ref"] for c in bom.get("components", [])
            if normalize(c["name"]) in build_only}
    # cyclonedx-py describes each component by its lock line, hashes and all: the hashes are
    # kept where they belong (its distribution reference), the line itself says nothing more
    bom["components"] = [{k: v for k, v in c.items() if k != "description"}
                         for c in bom.get("components", []) if c["bom-ref"] not in gone]
    bom["dependencies"] = [
        {**d, "dependsOn": [r for r in d.get("dependsOn", []) if r not in gone]}
        for d in bom.get("dependencies", []) if d["ref"] not in gone]
    out.write_text(json.dumps(bom, indent=2) + "\n", encoding="utf-8")
    return bom


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "sbom.cdx.json"
    bom = build(out)
    print(f"{out}: CycloneDX {bom['specVersion']}, {len(bom['components'])} components "
          f"(requirements.lock, less what only builds the package)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
