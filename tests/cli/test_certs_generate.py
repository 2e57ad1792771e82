"""`gpupolicy certs generate`: the chart's lifetimes, the CA kept apart, renewal from it."""

from __future__ import annotations

import datetime as dt
import io
import stat
from pathlib import Path

import pytest
from cryptography import x509

from webhook import certs
from webhook.cli import run as cli_run


def _generate(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(["certs", "generate", "--service", "hook", "--namespace", "gpu", *args],
                   out, err)
    return code, out.getvalue(), err.getvalue()


def _cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _days_left(cert: x509.Certificate) -> float:
    return (cert.not_valid_after_utc - dt.datetime.now(dt.UTC)).total_seconds() / 86400


def test_defaults_are_the_charts(tmp_path: Path) -> None:
    code, _, err = _generate("--out", str(tmp_path))
    assert code == 0, err
    assert 179.9 < _days_left(_cert(tmp_path / "tls.crt")) <= 180
    assert 3649.9 < _days_left(_cert(tmp_path / "ca.crt")) <= 3650
    assert (tmp_path / "ca.key").exists()  # without --ca, beside the pair as before


def test_the_ca_kept_apart_and_renewal_from_it(tmp_path: Path) -> None:
    out, ca_dir = tmp_path / "secret", tmp_path / "ca"
    code, said, err = _generate("--out", str(out), "--ca", str(ca_dir), "--days", "90")
    assert code == 0, err
    assert "a new CA" in said
    assert sorted(p.name for p in out.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert sorted(p.name for p in ca_dir.iterdir()) == ["ca.crt", "ca.key"]
    assert stat.S_IMODE((ca_dir / "ca.key").stat().st_mode) == 0o600
    first = (out / "tls.crt").read_bytes()
    code, said, err = _generate("--out", str(out), "--ca", str(ca_dir))
    assert code == 0, err
    assert "the existing CA" in said
    assert (out / "ca.crt").read_bytes() == (ca_dir / "ca.crt").read_bytes()  # same caBundle
    assert (out / "tls.crt").read_bytes() != first
    renewed = _cert(out / "tls.crt")
    renewed.verify_directly_issued_by(_cert(ca_dir / "ca.crt"))
    assert 179.9 < _days_left(renewed) <= 180
    certs.check_pair((out / "tls.crt").read_bytes(), (out / "tls.key").read_bytes(),
                     ("hook.gpu.svc",))


@pytest.mark.parametrize(("args", "words"), [
    (["--days", "0"], "--days"),
    (["--ca-days", "0"], "--ca-days"),
    (["--ca-days", "30"], "ends"),  # a new CA shorter than the certificate it signs
], ids=["days", "ca-days", "ca-shorter"])
def test_refused(tmp_path: Path, args: list[str], words: str) -> None:
    code, _, err = _generate("--out", str(tmp_path / "o"), "--ca", str(tmp_path / "ca"), *args)
    assert code == 2 and words in err
    assert not (tmp_path / "o").exists()


def test_a_ca_whose_key_is_not_its_own_is_refused(tmp_path: Path) -> None:
    certs.write_ca(certs.build_ca(), tmp_path)
    other = certs.build_ca()
    (tmp_path / "ca.key").write_bytes(certs.write_ca(other, tmp_path / "x")["ca_key"].read_bytes())
    code, _, err = _generate("--out", str(tmp_path / "o"), "--ca", str(tmp_path))
    assert code == 2 and "not the EC key" in err
