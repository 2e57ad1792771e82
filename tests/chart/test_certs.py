"""Self-signed certificates that survive `helm upgrade`, and renew through it.

How reuse is shown honestly: a client-side `helm template` never runs `lookup` (it returns
nothing), so these tests render with `helm template --dry-run=server` against a fake API server
on 127.0.0.1 (tests/chart/fake_apiserver.py). Helm then runs the chart's real `lookup` over HTTP.
Render 1 is a first install (no Secret: a CA is generated). The fake server then serves render
1's Secrets, as a cluster would after the install, and render 2 must reuse them byte for byte:
the same CA in the Secrets and in every webhook caBundle, and the same checksum annotation, so
an upgrade neither swaps the CA nor restarts the pods. Then the cluster's Secrets are changed
to what time or an earlier chart version leaves (a serving certificate near its end, a 10-year
pair with the CA's key beside it) and the upgrade must renew from the same CA.
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
from tests.chart.helm import NAMESPACE, documents, named, one, render, template, webhooks

SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/rel-gpupolicy-tls"
SERVING, CA = "rel-gpupolicy-tls", "rel-gpupolicy-ca"
NOT_AFTER = "gpupolicy.io/not-after"
VALIDITY = datetime.timedelta(days=180)  # certs.selfSigned.certValidityDays
RENEW_BEFORE = datetime.timedelta(days=60)  # certs.selfSigned.renewBeforeDays


def _render_against(server: FakeAPIServer, tmp: Path, *args: str) -> list[dict[str, Any]]:
    result = template("--dry-run=server", "--disable-openapi-validation",
                      "--kubeconfig", str(server.kubeconfig(tmp)), *args)
    assert result.returncode == 0, result.stderr
    return documents(result.stdout)


def _as_installed(secret: dict[str, Any], **annotations: str | None) -> dict[str, Any]:
    """The Secret as the cluster holds it after `helm install`: helm adds ownership marks;
    `annotations` changes the chart's own (None removes one)."""
    given = {**(secret["metadata"].get("annotations") or {}),
             "meta.helm.sh/release-name": "rel", "meta.helm.sh/release-namespace": NAMESPACE}
    for key, value in annotations.items():
        if value is None:
            given.pop(key, None)
        else:
            given[key] = value
    return {**secret, "metadata": {**secret["metadata"], "annotations": given}}


def _facts(objects: list[dict[str, Any]]) -> dict[str, Any]:
    secret = named(objects, "Secret", SERVING)
    bundles = {hook["clientConfig"]["caBundle"]
               for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
               for hook in webhooks(objects, kind).values()}
    annotations = one(objects, "Deployment")["spec"]["template"]["metadata"]["annotations"]
    return {"secret": secret, "data": secret["data"], "bundles": bundles,
            "ca": named(objects, "Secret", CA), "not_after": secret["metadata"]["annotations"][NOT_AFTER],
            "checksum": annotations["checksum/tls"]}


def _stamp(when: datetime.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("fake-apiserver")
    out: dict[str, dict[str, Any]] = {}
    now = datetime.datetime.now(datetime.UTC)
    with FakeAPIServer().running() as server:
        out["install"] = install = _facts(_render_against(server, tmp))
        out["install-again"] = _facts(_render_against(server, tmp))
        looked_up = server.requests.count(SECRET_PATH)
        server.put_secret(_as_installed(install["secret"]))
        server.put_secret(_as_installed(install["ca"]))
        out["upgrade"] = _facts(_render_against(server, tmp))
        out["upgrade-again"] = _facts(_render_against(server, tmp))
        out["reissue"] = _facts(_render_against(
            server, tmp, "--set", "certs.selfSigned.reissueServingCert=true"))
        # Time passes: the same pair, its end now nearer than renewBeforeDays, or not.
        for name, left in (("inside-window", RENEW_BEFORE - datetime.timedelta(days=1)),
                           ("outside-window", RENEW_BEFORE + datetime.timedelta(days=1))):
            server.put_secret(_as_installed(install["secret"], **{NOT_AFTER: _stamp(now + left)}))
            out[name] = _facts(_render_against(server, tmp))
        server.put_secret(_as_installed(install["secret"], **{NOT_AFTER: "next spring"}))
        out["garbled-end"] = _facts(_render_against(server, tmp))
        # An earlier chart version: the CA's key in the serving Secret, no CA Secret, no end.
        server.secrets.clear()
        legacy = _as_installed(install["secret"], **{NOT_AFTER: None})
        legacy["data"] = {**legacy["data"], "ca.key": install["ca"]["data"]["ca.key"]}
        server.put_secret(legacy)
        out["from-earlier-version"] = _facts(_render_against(server, tmp))
    out["meta"] = {"looked_up": looked_up}
    return out


def test_lookup_really_asked_the_api_server(renders: dict[str, dict[str, Any]]) -> None:
    assert renders["meta"]["looked_up"] >= 2


def test_without_a_secret_each_render_generates_a_new_ca(
    renders: dict[str, dict[str, Any]],
) -> None:
    """The control: no Secret in the cluster means a fresh CA, so equality below means reuse."""
    assert renders["install"]["data"]["ca.crt"] != renders["install-again"]["data"]["ca.crt"]


@pytest.mark.parametrize("render_name", ["upgrade", "upgrade-again", "outside-window"])
def test_upgrade_reuses_the_secrets(renders: dict[str, dict[str, Any]], render_name: str) -> None:
    install, upgrade = renders["install"], renders[render_name]
    assert upgrade["data"] == install["data"]
    assert upgrade["ca"]["data"] == install["ca"]["data"]
    assert upgrade["bundles"] == {install["data"]["ca.crt"]}
    assert upgrade["checksum"] == install["checksum"]  # no needless rollout


@pytest.mark.parametrize("render_name", ["reissue", "inside-window", "garbled-end",
                                         "from-earlier-version"])
def test_renewal_keeps_the_ca_and_rolls_the_pods(renders: dict[str, dict[str, Any]],
                                                 render_name: str) -> None:
    install, renewed = renders["install"], renders[render_name]
    assert renewed["data"]["ca.crt"] == install["data"]["ca.crt"]
    assert renewed["ca"]["data"] == install["ca"]["data"]  # the CA's key carried over
    assert renewed["bundles"] == {install["data"]["ca.crt"]}
    assert renewed["data"]["tls.crt"] != install["data"]["tls.crt"]
    assert renewed["checksum"] != install["checksum"]
    assert "ca.key" not in renewed["data"]
    cert = _verify_chain(renewed["data"])
    _check_lifetime(cert, renewed["not_after"])


def _check_lifetime(cert: x509.Certificate, not_after: str) -> None:
    """A new serving certificate lasts certValidityDays, and the annotation a later upgrade
    reads says when it ends (a minute early at most)."""
    now = datetime.datetime.now(datetime.UTC)
    assert abs(cert.not_valid_after_utc - now - VALIDITY) < datetime.timedelta(minutes=10)
    recorded = datetime.datetime.fromisoformat(not_after)
    assert datetime.timedelta(0) <= cert.not_valid_after_utc - recorded <= datetime.timedelta(minutes=2)


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
    """What the API server checks (webhook-contract.md): SAN <svc>.<ns>.svc, chain to caBundle;
    short-lived, with its end recorded for the next upgrade."""
    secret = named(render(), "Secret", SERVING)
    cert = _verify_chain(secret["data"])
    names = cert.extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert "rel-gpupolicy.gpu-system.svc" in names
    _check_lifetime(cert, secret["metadata"]["annotations"][NOT_AFTER])


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
