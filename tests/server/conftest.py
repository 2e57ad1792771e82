"""One real server for the whole tests/server area (starting gunicorn costs about a second)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from policies.context import Context
from tests.server import harness
from webhook import certs
from webhook.inputs import sources

HERE = Path(__file__).resolve().parent
POLICIES = HERE / "policies"
NAMESPACES = HERE / "namespaces.yaml"
EXCLUDED = frozenset({"kube-system", "gpupolicy"})  # serve's default: kube-system + its own


@pytest.fixture(scope="session")
def tls_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tls")
    ca = certs.build_ca()
    certs.write_bundle(certs.build_serving_cert("gpupolicy", "gpupolicy", ca), out)
    return out


@pytest.fixture(scope="session")
def server(tls_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Server]:
    work = tmp_path_factory.mktemp("server")
    srv = harness.start(
        ["--tls-cert", str(tls_dir / "tls.crt"), "--tls-key", str(tls_dir / "tls.key"),
         "--policies", str(POLICIES), "--namespaces", str(NAMESPACES), "--workers", "2"],
        work, ca=tls_dir / "ca.crt",
    )
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def context() -> Context:
    """The Context the server builds from the same files: the engine's expected answers."""
    return Context(
        policies=sources.load_policies(POLICIES), catalog=sources.load_catalog(),
        namespaces=sources.load_namespaces([NAMESPACES]), excluded_namespaces=EXCLUDED,
    )
