"""Self-signed certificates that survive `helm upgrade`.

How reuse is shown honestly: a client-side `helm template` never runs `lookup` (it returns
nothing), so these tests render with `helm template --dry-run=server` against a fake API server
on 127.0.0.1 (tests/chart/fake_apiserver.py). Helm then runs the chart's real `lookup` over HTTP.
Render 1 is a first install (no Secret: a CA is generated). The fake server then serves render
1's Secret, as a cluster would after the install, and render 2 must reuse it byte for byte: the
same CA in the Secret and in every webhook caBundle, and the same checksum annotation, so an
upgrade neither swaps the CA nor restarts the pods.
"""

from __future__ import annotations

import base64
import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from tests.chart.fake_apiserver import FakeAPIServer
from tests.chart.helm import NAMESPACE, documents, one, render, template, webhooks

SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/rel-gpupolicy-tls"


def _render_against(server: FakeAPIServer, tmp: Path, *args: str) -> list[dict[str, Any]]:
    result = template("--dry-run=server", "--disable-openapi-validation",
                      "--kubeconfig", str(server.kubeconfig(tmp)), *args)
    assert result.returncode == 0, result.stderr
    return documents(result.stdout)


def _as_installed(secret: dict[str, Any]) -> dict[str, Any]:
    """The Secret as the cluster holds it after `helm install`: helm adds ownership marks."""
    meta = {**secret["metadata"], "annotations": {
        "meta.helm.sh/release-name": "rel", "meta.helm.sh/release-namespace": NAMESPACE}}
    return {**secret, "metadata": meta}


def _facts(objects: list[dict[str, Any]]) -> dict[str, Any]:
    secret = one(objects, "Secret")
    bundles = {hook["clientConfig"]["caBundle"]
               for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
               for hook in webhooks(objects, kind).values()}
    annotations = one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    return {"secret": secret, "data": secret["data"], "bundles": bundles,
            "checksum": annotations["checksum/tls"]}


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fake-apiserver")
    out: dict[str, dict[str, Any]] = {}
    with FakeAPIServer().running() as server:
        out["install"] = _facts(_render_against(server, tmp))
        out["install-again"] = _facts(_render_against(server, tmp))
        looked_up = server.requests.count(SECRET_PATH)
        server.put_secret(_as_installed(out["install"]["secret"]))
        out["upgrade"] = _facts(_render_against(server, tmp))
        out["upgrade-again"] = _facts(_render_against(server, tmp))
        out["reissue"] = _facts(_render_against(
            server, tmp, "--set", "certs.selfSigned.reissueServingCert=true"))
    out["meta"] = {"looked_up": looked_up}
    return out


def test_lookup_really_asked_the_api_server(renders: dict[str, dict[str, Any]]) -> None:
    assert renders["meta"]["looked_up"] >= 2


def test_without_a_secret_each_render_generates_a_new_ca(
    renders: dict[str, dict[str, Any]],
) -> None:
    """The control: no Secret in the cluster means a fresh CA, so equality below means reuse."""
    assert renders["install"]["data"]["ca.crt"] != renders["install-again"]["data"]["ca.crt"]


@pytest.mark.parametrize("render_name", ["upgrade", "upgrade-again"])
def test_upgrade_reuses_the_secret(renders: dict[str, dict[str, Any]], render_name: str) -> None:
    install, upgrade = renders["install"], renders[render_name]
    assert upgrade["data"] == install["data"]
    assert upgrade["bundles"] == {install["data"]["ca.crt"]}
    assert upgrade["checksum"] == install["checksum"]  # no needless rollout


def test_reissue_keeps_the_ca_and_rolls_the_pods(renders: dict[str, dict[str, Any]]) -> None:
    install, reissue = renders["install"], renders["reissue"]
    assert reissue["data"]["ca.crt"] == install["data"]["ca.crt"]
    assert reissue["bundles"] == {install["data"]["ca.crt"]}
    assert reissue["data"]["tls.crt"] != install["data"]["tls.crt"]
    assert reissue["checksum"] != install["checksum"]
    _verify_chain(reissue["data"])


def _load(data: dict[str, str], key: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(data[key]))


def _verify_chain(data: dict[str, str]) -> x509.Certificate:
    ca, cert = _load(data, "ca.crt"), _load(data, "tls.crt")
    public_key = ca.public_key()
    assert cert.signature_hash_algorithm is not None
    if isinstance(public_key, rsa.RSAPublicKey):
        public_key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(),
                          cert.signature_hash_algorithm)
    else:
        assert isinstance(public_key, ec.EllipticCurvePublicKey)
        public_key.verify(cert.signature, cert.tbs_certificate_bytes,
                          ec.ECDSA(cert.signature_hash_algorithm))
    assert cert.issuer == ca.subject
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    return cert


def test_generated_pair_serves_the_service_name() -> None:
    """What the API server checks (webhook-contract.md): SAN <svc>.<ns>.svc, chain to caBundle."""
    data = one(render(), "Secret")["data"]
    cert = _verify_chain(data)
    names = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "rel-gpupolicy.gpu-system.svc" in names
    lifetime = cert.not_valid_after_utc - datetime.datetime.now(datetime.UTC)
    assert lifetime > datetime.timedelta(days=3000)


def test_bring_your_own_with_gpupolicy_certs_generate(tmp_path: Path) -> None:
    """The BYO path end to end: `gpupolicy certs generate` for the chart's Service, its CA as
    certs.caBundle, and the webhooks then trust exactly that CA for that Service name."""
    import io

    from webhook import cli

    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["certs", "generate", "--service", "rel-gpupolicy", "--namespace", NAMESPACE,
                    "--out", str(tmp_path)], out, err)
    assert code == 0, err.getvalue()
    ca_b64 = base64.b64encode((tmp_path / "ca.crt").read_bytes()).decode()
    result = template("--set", "certs.mode=secret", "--set", "certs.secretName=byo",
                      "--set", f"certs.caBundle={ca_b64}")
    assert result.returncode == 0, result.stderr
    objects = documents(result.stdout)
    service = one(objects, "Service")["metadata"]["name"]
    data = {"ca.crt": ca_b64,
            "tls.crt": base64.b64encode((tmp_path / "tls.crt").read_bytes()).decode()}
    cert = _verify_chain(data)
    names = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"{service}.{NAMESPACE}.svc" in names
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for hook in webhooks(objects, kind).values():
            assert hook["clientConfig"]["caBundle"] == ca_b64
            assert hook["clientConfig"]["service"]["name"] == service
