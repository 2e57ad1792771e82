"""Commands that never talk to a cluster do not load its client (issue 19): importing the
`kubernetes` package (and urllib3 under it) took about a second and a half of every
`audit --help` and every audit or explain of a file. Each row runs one command in a fresh
interpreter and reads which modules it loaded; the live rows prove the client is still
loaded when a kubeconfig is in play."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.conftest import api_server, kubeconfig  # noqa: F401  (the fake API server)

ROOT = Path(__file__).resolve().parent.parent.parent
CLIENT = ("kubernetes", "urllib3")
MANIFESTS = "tests/lint/fixtures/manifests/training.yaml"
NODES = "tests/engine/fixtures/nodes.yaml"
DRA = "tests/cluster/data/dra.yaml"  # nodes, slices and device classes
CLAIMS = "tests/lint/fixtures/dra/claims.yaml"
FLEET = "tests/migrate/fixtures/fleet.yaml"

# One command through the dispatcher, as `gpupolicy ARGS` runs it; then what it loaded.
COMMAND = f"""
import io, json, sys
from webhook.cli import run
code = run(sys.argv[1:], io.StringIO(), io.StringIO())
print(json.dumps([code, sorted(m for m in sys.modules if m.split(".")[0] in {CLIENT!r})]))
"""
# What a `serve` worker loads: its app (webhook.commands.serve._load_app), cluster or not.
WORKER = f"""
import json, os, sys
from webhook.cli import command_parser
from webhook.commands import serve
serve._load_app(command_parser("serve").parse_args(sys.argv[1:]))
print(json.dumps([0, sorted(m for m in sys.modules if m.split(".")[0] in {CLIENT!r})]))
sys.stdout.flush()
os._exit(0)  # the file watcher (and cluster caches) would keep it running
"""

# (id, the command's arguments, the exit codes it may give): none talks to a cluster.
# {tmp}: a fresh directory
OFFLINE = [
    ("top-help", ["--help"], {0}),
    ("audit-help", ["audit", "--help"], {0}),
    ("audit-file", ["audit", MANIFESTS], {1}),
    ("audit-dump-sharded", ["audit", DRA, CLAIMS, "-o", "policyreport", "--shard", "1/2"], {0, 1}),
    ("audit-stdin", ["audit", "-"], {0}),
    ("audit-sarif", ["audit", MANIFESTS, "-o", "sarif"], {1}),
    ("explain-file", ["explain", MANIFESTS, "--inventory", NODES], {0, 1}),
    ("explain-claim", ["explain", CLAIMS, "--inventory", DRA], {0, 1}),
    ("explain-help", ["explain", "--help"], {0}),
    ("migrate-files", ["migrate", MANIFESTS, "--inventory", FLEET, "--to-dra"], {0, 1}),
    ("lint", ["lint", MANIFESTS], {1}),
    ("review", ["review", MANIFESTS], {1}),
    ("policy-check", ["policy", "check", "tests/lint/fixtures/policies/teams.yaml"], {0}),
    ("schema", ["schema"], {0}),
    ("rules", ["rules"], {0}),
    ("rules-one", ["rules", "cuda-driver-too-old"], {0}),
    ("export", ["export"], {0}),
    ("export-help", ["export", "--help"], {0}),
    ("test", ["test", "policies/defaults-tests/suite.yaml"], {0}),
    ("completion", ["completion", "bash"], {0}),
    ("serve-help", ["serve", "--help"], {0}),
    ("certs", ["certs", "generate", "--out", "{tmp}/certs"], {0}),
]


def _loaded(script: str, args: list[str], cwd: Path = ROOT) -> tuple[int, list[str]]:
    # no in-cluster config: as on a laptop or in CI
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", script, *args], cwd=cwd, env=env, input="",
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    code, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    return int(code), list(loaded)


@pytest.mark.parametrize(("case", "args", "codes"), OFFLINE, ids=[c[0] for c in OFFLINE])
def test_offline_commands_do_not_load_the_client(case: str, args: list[str], codes: set[int],
                                                 tmp_path: Path) -> None:
    code, loaded = _loaded(COMMAND, [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert code in codes, f"{case}: exit {code}: the command did not run as meant"
    assert loaded == [], f"{case} loaded {loaded[:5]}"


def test_serve_without_a_cluster_does_not_load_the_client(tmp_path: Path) -> None:
    # before forking: the inputs and the cluster credentials are checked, then the bind fails
    code, loaded = _loaded(COMMAND, ["serve", "--host", "203.0.113.7", "--metrics-port", "0"],
                           cwd=tmp_path)
    assert code == 2  # cannot listen on an address this host does not have
    assert loaded == []
    # each worker
    code, loaded = _loaded(WORKER, ["--policies", str(ROOT / "policies/defaults")], cwd=tmp_path)
    assert loaded == []


def test_a_kubeconfig_loads_the_client(kubeconfig: str, tmp_path: Path) -> None:  # noqa: F811
    code, loaded = _loaded(COMMAND, ["audit", "--kubeconfig", kubeconfig])
    assert code == 0 and "kubernetes" in loaded
    code, loaded = _loaded(COMMAND, ["explain", "default/nothing", "--kubeconfig", kubeconfig])
    assert code == 2 and "kubernetes" in loaded  # not found, asked of the cluster
    code, loaded = _loaded(WORKER, ["--kubeconfig", kubeconfig, "--policies",
                                    str(ROOT / "policies/defaults")], cwd=tmp_path)
    assert "kubernetes" in loaded


def test_a_missing_kubeconfig_is_an_error_from_the_client(tmp_path: Path) -> None:
    code, loaded = _loaded(COMMAND, ["audit", "--kubeconfig", str(tmp_path / "none")])
    assert code == 2 and "kubernetes" in loaded


def test_the_table_covers_every_command() -> None:
    from webhook.cli import COMMANDS

    assert {args[0] for _, args, _ in OFFLINE} >= set(COMMANDS)
