"""Client certificates for devices, for Mosquitto's client-certificate listener.

A device may connect with a certificate instead of a password: the listener
(``require_certificate true``, ``use_identity_as_username true``, its ``cafile``
the device CA; ``scripts/services.sh`` writes one) takes the certificate's
common name as the MQTT username and skips the password check. The name is the
device key's id, so the key's dynamic-security client and roles
(:mod:`voxwire.broker.dynsec`) decide what the device may do, exactly as when it
connects with the key as password, and revoking the key (its client deleted)
leaves the certificate with nothing it may publish or read. To refuse the
certificate at the TLS handshake too, :func:`add_to_crl` adds it to the device CA's
certificate revocation list, the listener's ``crlfile`` (Mosquitto reads it
again on SIGHUP).

:func:`issue` makes the device's key pair (EC P-256, which small TLS stacks
such as mbedTLS handle) and a certificate for client authentication only,
signed by a :class:`DeviceAuthority` (the device CA's certificate and key,
:meth:`DeviceAuthority.load`). Nothing here touches the network.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificatePublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from voxwire.core.errors import ConfigError

CertificateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
"""The kinds of CA key a device CA may have."""

CERT_FILE = "device.crt"
KEY_FILE = "device.key"
MAX_DAYS = 3650


@dataclass(frozen=True)
class DeviceAuthority:
    """The CA that signs device certificates (the listener's ``cafile``)."""

    certificate: x509.Certificate
    key: CertificateKey

    @classmethod
    def load(cls, cert_path: Path, key_path: Path) -> DeviceAuthority:
        """The CA in two PEM files; a :class:`ConfigError` saying what is wrong."""
        hint = "give the device CA's files (--ca-cert, --ca-key; scripts/services.sh env sets them)"
        try:
            cert_pem, key_pem = cert_path.read_bytes(), key_path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the device CA: {exc}", hint=hint) from exc
        try:
            certificate = x509.load_pem_x509_certificate(cert_pem)
        except ValueError as exc:
            raise ConfigError(f"{cert_path} is not a PEM certificate", hint=hint) from exc
        try:
            key = serialization.load_pem_private_key(key_pem, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
            raise ConfigError(
                f"{key_path} is not an unencrypted PEM private key", hint=hint
            ) from exc
        if not isinstance(key, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise ConfigError(f"{key_path}: the CA key must be EC or RSA", hint=hint)
        if _spki(key.public_key()) != _spki(certificate.public_key()):
            raise ConfigError(f"{key_path} is not the key of {cert_path}", hint=hint)
        try:
            is_ca = certificate.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        if not is_ca:
            raise ConfigError(f"{cert_path} is not a CA certificate (basicConstraints CA:TRUE)")
        return cls(certificate, key)


def _spki(public_key: CertificatePublicKeyTypes) -> bytes:
    return public_key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@dataclass(frozen=True)
class DeviceCertificate:
    """A device's certificate and private key (PEM), and what identifies it."""

    key_id: str
    serial: int
    not_after: dt.datetime
    certificate_pem: bytes
    key_pem: bytes


def issue(
    authority: DeviceAuthority, key_id: str, *, now: dt.datetime, days: int = 730
) -> DeviceCertificate:
    """A new key pair and certificate whose common name is ``key_id``."""
    if not 1 <= days <= MAX_DAYS:
        raise ConfigError(f"a device certificate lasts 1 to {MAX_DAYS} days, not {days}")
    if not key_id or len(key_id) > 64 or not key_id.isascii() or not key_id.isprintable():
        raise ConfigError(f"{key_id!r} cannot be a certificate's common name")
    device_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = authority.certificate
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, key_id)]))
        .issuer_name(ca_cert.subject)
        .public_key(device_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))  # a device clock a little behind
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(device_key.public_key()), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
            critical=False,
        )
        .sign(authority.key, hashes.SHA256())
    )
    return DeviceCertificate(
        key_id=key_id,
        serial=certificate.serial_number,
        not_after=not_after,
        certificate_pem=certificate.public_bytes(serialization.Encoding.PEM),
        key_pem=device_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


@dataclass(frozen=True)
class Revocation:
    """A certificate revocation list with one more certificate in it."""

    serial: int
    crl_pem: bytes
    already: bool
    """Whether the previous list had that certificate already."""


def add_to_crl(
    authority: DeviceAuthority,
    certificate_pem: bytes,
    previous_crl: bytes | None,
    *,
    now: dt.datetime,
) -> Revocation:
    """The CA's revocation list (``previous_crl``, or an empty one) with the
    certificate added, signed anew; it lasts as long as the CA."""
    try:
        certificate = x509.load_pem_x509_certificate(certificate_pem)
    except ValueError as exc:
        raise ConfigError("not a PEM certificate: give the device's device.crt") from exc
    try:
        certificate.verify_directly_issued_by(authority.certificate)
    except (ValueError, TypeError, InvalidSignature) as exc:
        raise ConfigError("the certificate was not issued by this device CA") from exc
    revoked: list[x509.RevokedCertificate] = []
    number, last = 0, now - dt.timedelta(days=1)
    if previous_crl:
        try:
            crl = x509.load_pem_x509_crl(previous_crl)
        except ValueError as exc:
            raise ConfigError("the revocation list is not a PEM CRL") from exc
        if crl.issuer != authority.certificate.subject or not crl.is_signature_valid(
            authority.key.public_key()
        ):
            raise ConfigError("the revocation list was not signed by this device CA")
        revoked = list(crl)
        last = crl.last_update_utc
        with contextlib.suppress(x509.ExtensionNotFound):
            number = crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number
    already = any(entry.serial_number == certificate.serial_number for entry in revoked)
    if not already:
        revoked.append(
            x509.RevokedCertificateBuilder()
            .serial_number(certificate.serial_number)
            .revocation_date(now)
            .build()
        )
    # OpenSSL keeps every list it was given and trusts the one updated last
    update = max(now, last + dt.timedelta(seconds=1)).replace(microsecond=0)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(authority.certificate.subject)
        .last_update(update)
        .next_update(max(authority.certificate.not_valid_after_utc, update))
        .add_extension(x509.CRLNumber(number + 1), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(authority.key.public_key()),
            critical=False,
        )
    )
    for entry in revoked:
        builder = builder.add_revoked_certificate(entry)
    crl_pem = builder.sign(authority.key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
    return Revocation(certificate.serial_number, crl_pem, already)


def check_out_dir(out_dir: Path) -> None:
    """Refuse a folder that already holds a device's files (nothing is overwritten)."""
    taken = [name for name in (CERT_FILE, KEY_FILE) if (out_dir / name).exists()]
    if taken:
        raise ConfigError(
            f"{out_dir} already holds {', '.join(taken)}",
            hint="give each device a folder of its own",
        )
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} is not a folder")


def write(issued: DeviceCertificate, out_dir: Path) -> tuple[Path, Path]:
    """Write ``device.crt`` and ``device.key`` (mode 600) into ``out_dir``; their paths."""
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = out_dir / CERT_FILE, out_dir / KEY_FILE
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(issued.key_pem)
    cert_path.write_bytes(issued.certificate_pem)
    return cert_path, key_path
