"""Device certificates as issued (what Mosquitto's client-certificate listener
checks: signed by the device CA, for client authentication, CN = the key id), and
the clear errors for a CA that cannot sign them or a folder already in use."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from typer.testing import CliRunner

from voxwire.broker.device_certs import DeviceAuthority, add_to_crl, issue, write
from voxwire.cli import app
from voxwire.core.errors import ConfigError

NOW = dt.datetime(2026, 12, 2, 9, 0, tzinfo=dt.UTC)


def _ca(folder: Path, *, ca: bool = True, days: int = 3650) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "device CA")])
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(1)
        .not_valid_before(NOW - dt.timedelta(days=1)).not_valid_after(NOW + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "ca.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return folder / "ca.crt", folder / "ca.key"


def test_a_certificate_names_the_key_and_is_signed_by_the_device_ca(tmp_path: Path) -> None:
    authority = DeviceAuthority.load(*_ca(tmp_path / "ca"))
    issued = issue(authority, "1a2b3c4d", now=NOW, days=30)
    cert_path, key_path = write(issued, tmp_path / "kitchen")
    cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
    cert.verify_directly_issued_by(authority.certificate)
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "1a2b3c4d"
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.not_valid_after_utc == NOW + dt.timedelta(days=30) == issued.not_after
    key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    assert key.public_key() == cert.public_key()
    assert key_path.stat().st_mode & 0o777 == 0o600
    # never outlives its CA
    short = DeviceAuthority.load(*_ca(tmp_path / "short", days=10))
    assert issue(short, "1a2b3c4d", now=NOW).not_after == short.certificate.not_valid_after_utc


def test_a_ca_that_cannot_sign_device_certificates_is_named(tmp_path: Path) -> None:
    cert, key = _ca(tmp_path / "ca")
    other_cert, other_key = _ca(tmp_path / "other")
    leaf_cert, leaf_key = _ca(tmp_path / "leaf", ca=False)
    cases = [
        ((tmp_path / "missing.crt", key), "cannot read the device CA"),
        ((key, key), "is not a PEM certificate"),
        ((cert, cert), "is not an unencrypted PEM private key"),
        ((cert, other_key), "is not the key of"),
        ((leaf_cert, leaf_key), "is not a CA certificate"),
    ]
    for paths, message in cases:
        with pytest.raises(ConfigError, match=message):
            DeviceAuthority.load(*paths)
    assert DeviceAuthority.load(other_cert, other_key)
    authority = DeviceAuthority.load(cert, key)
    with pytest.raises(ConfigError, match="1 to 3650 days"):
        issue(authority, "1a2b3c4d", now=NOW, days=0)
    write(issue(authority, "1a2b3c4d", now=NOW), tmp_path / "used")
    with pytest.raises(ConfigError, match=r"already holds device\.crt, device\.key"):
        write(issue(authority, "5e6f7a8b", now=NOW), tmp_path / "used")


def test_the_cli_refuses_a_certificate_before_making_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VOXWIRE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("VOXWIRE_CONFIG", str(tmp_path / "server.toml"))
    monkeypatch.delenv("VOXWIRE_DEVICE_CA_CERT", raising=False)
    monkeypatch.delenv("VOXWIRE_DEVICE_CA_KEY", raising=False)
    monkeypatch.delenv("VOXWIRE_DEVICE_CRL", raising=False)
    cert, key = _ca(tmp_path / "ca")
    runner = CliRunner()
    create = ["keys", "create", "--cert-out", str(tmp_path / "out")]
    env = {"COLUMNS": "200"}
    tenant_key = runner.invoke(app, create, env=env)
    assert tenant_key.exit_code == 1 and "--cert-out is for device keys" in tenant_key.output
    no_ca = runner.invoke(app, [*create, "--device", "mic"], env=env)
    assert no_ca.exit_code == 1 and "needs the device CA" in no_ca.output
    bad_ca = runner.invoke(app, [*create, "--device", "mic", "--ca-cert", str(key),
                                 "--ca-key", str(key)], env=env)  # fmt: skip
    assert bad_ca.exit_code == 1 and "is not a PEM certificate" in bad_ca.output
    listed = runner.invoke(app, ["keys", "list"], env=env)
    assert listed.exit_code == 0 and "mic" not in listed.output  # no key was made
    made = runner.invoke(app, [*create, "--device", "mic", "--ca-cert", str(cert),
                               "--ca-key", str(key)], env=env)  # fmt: skip
    assert made.exit_code == 0, made.output
    assert (tmp_path / "out" / "device.crt").exists() and "client certificate" in made.output
    key_id = made.output.split("device key id ")[1].split()[0]
    revoke = ["keys", "revoke", "--cert", str(tmp_path / "out" / "device.crt"),
              "--ca-cert", str(cert), "--ca-key", str(key)]  # fmt: skip
    crl = tmp_path / "device-ca.crl"
    no_crl = runner.invoke(app, [*revoke, key_id], env=env)
    assert no_crl.exit_code == 1 and "--cert needs --crl" in no_crl.output
    wrong = runner.invoke(app, [*revoke, "--crl", str(crl), "0a0b0c0d"], env=env)
    assert wrong.exit_code == 1 and "is not key 0a0b0c0d's certificate" in wrong.output
    assert not crl.exists()
    revoked = runner.invoke(app, [*revoke, "--crl", str(crl), key_id], env=env)
    assert revoked.exit_code == 0, revoked.output
    assert f"added to {crl}" in revoked.output and f"revoked {key_id}" in revoked.output
    assert len(list(x509.load_pem_x509_crl(crl.read_bytes()))) == 1


def test_a_revocation_list_keeps_every_revoked_certificate(tmp_path: Path) -> None:
    authority = DeviceAuthority.load(*_ca(tmp_path / "ca"))
    other = DeviceAuthority.load(*_ca(tmp_path / "other"))
    first, second = (issue(authority, key_id, now=NOW) for key_id in ("1a2b3c4d", "5e6f7a8b"))
    one = add_to_crl(authority, first.certificate_pem, None, now=NOW)
    two = add_to_crl(authority, second.certificate_pem, one.crl_pem, now=NOW)
    again = add_to_crl(authority, first.certificate_pem, two.crl_pem, now=NOW)
    assert not one.already and not two.already and again.already
    crl = x509.load_pem_x509_crl(again.crl_pem)
    assert crl.is_signature_valid(authority.key.public_key())
    assert {entry.serial_number for entry in crl} == {first.serial, second.serial}
    assert crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number == 3
    # each list is newer than the last (OpenSSL trusts the one updated last), and lasts
    updates = [x509.load_pem_x509_crl(r.crl_pem).last_update_utc for r in (one, two, again)]
    assert updates == sorted(set(updates))
    assert crl.next_update_utc == authority.certificate.not_valid_after_utc
    with pytest.raises(ConfigError, match="not issued by this device CA"):
        add_to_crl(other, first.certificate_pem, None, now=NOW)
    with pytest.raises(ConfigError, match="not signed by this device CA"):
        add_to_crl(other, issue(other, "9c0d1e2f", now=NOW).certificate_pem, one.crl_pem, now=NOW)
    with pytest.raises(ConfigError, match="not a PEM certificate"):
        add_to_crl(authority, b"nonsense", None, now=NOW)
