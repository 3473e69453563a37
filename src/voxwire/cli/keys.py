"""``voxwire keys``: create, list and revoke API keys (stored hashed), and show
or rotate a key's webhook signing secret (``webhook-secret``: stored as it is,
since it signs; :mod:`voxwire.sessions.webhooks`).

A key acts for its whole tenant, unless it is a device key (``--device NAME``):
that one may only open sessions (live streams, uploads), send their audio and
follow and read the sessions it opened (:mod:`voxwire.access.keys`).

The keys live in the store the settings name (``store``): the embedded SQLite
store, or with ``--distributed`` (or ``VOXWIRE_MODE=distributed``) the
distributed mode's PostgreSQL in the ``namespace``'s schema. The store and the
broker's access rules come from the platform's adapters (:func:`voxwire.platform.build`),
as for the processes that serve: with Mosquitto (``broker = "external"``) a key
is a dynamic-security client, created with the key and deleted when it is
revoked, which disconnects the key's MQTT clients at once; EMQX and the embedded
broker ask the store at every connection.

``--cert-out DIR`` gives a device key a client certificate too (its common name
the key id, signed by the device CA: :mod:`voxwire.broker.device_certs`), for
Mosquitto's client-certificate listener, where the device connects without a
password and the key's rules apply.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from cryptography import x509
from cryptography.x509.oid import NameOID
from rich.table import Table

from voxwire.access.keys import KeyRole
from voxwire.broker.device_certs import (
    MAX_DAYS,
    DeviceAuthority,
    add_to_crl,
    check_out_dir,
    issue,
    write,
)
from voxwire.cli.common import console, fail
from voxwire.cli.installation import installation_name
from voxwire.core.config import Settings, load_settings
from voxwire.core.errors import StoreError, VoxwireError

if TYPE_CHECKING:
    from voxwire.platform import Platform

app = typer.Typer(help="Manage API keys. A key is shown once, when created.", no_args_is_help=True)

T = TypeVar("T")

DistributedOption = Annotated[
    bool,
    typer.Option(
        "--distributed",
        help="the distributed mode's PostgreSQL and broker (settings from the environment: "
        'set -a; eval "$(scripts/services.sh env)"; set +a)',
    ),
]

CaCertOption = Annotated[
    Path | None,
    typer.Option(help="the device CA's certificate (PEM)", envvar="VOXWIRE_DEVICE_CA_CERT"),
]
CaKeyOption = Annotated[
    Path | None,
    typer.Option(help="the device CA's private key (PEM)", envvar="VOXWIRE_DEVICE_CA_KEY"),
]

SERVICES_HINT = (
    "is PostgreSQL running (`make services`; `scripts/services.sh status postgres`) and are "
    'its settings in the environment (set -a; eval "$(scripts/services.sh env)"; set +a)? '
    "Without --distributed the keys are the embedded store's"
)


def _settings(distributed: bool) -> Settings:
    try:
        return load_settings(mode="distributed") if distributed else load_settings()
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


def _with_platform(settings: Settings, job: Callable[[Platform], Awaitable[T]]) -> T:
    """Run ``job`` on the platform of the settings (nothing started but what it uses)."""
    from voxwire.platform import build

    async def go() -> T:
        async with build(settings) as platform:
            return await job(platform)

    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)  # the error below says it once
    try:
        return asyncio.run(go())
    except StoreError as exc:
        fail(exc.message, SERVICES_HINT if settings.store == "postgres" else exc.hint)
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


@app.command()
def create(
    tenant: Annotated[str, typer.Option(help="tenant the key acts for")] = "default",
    label: Annotated[str, typer.Option(help="a note to recognise the key by")] = "cli",
    device: Annotated[
        str | None,
        typer.Option(
            help="a device key named NAME (its label): it may only open sessions and "
            "read the sessions it opened",
            metavar="NAME",
        ),
    ] = None,
    cert_out: Annotated[
        Path | None,
        typer.Option(
            help="with --device: also write the device's client certificate and private key "
            "(device.crt, device.key) into DIR, for Mosquitto's client-certificate listener",
            metavar="DIR",
        ),
    ] = None,
    ca_cert: CaCertOption = None,
    ca_key: CaKeyOption = None,
    cert_days: Annotated[int, typer.Option(help="how long the certificate lasts")] = 730,
    distributed: DistributedOption = False,
) -> None:
    """Create a key and print it (only this once)."""
    settings = _settings(distributed)
    if device is not None and not device.strip():
        fail("--device needs a name", hint="e.g. --device kitchen-mic")
    authority = _device_authority(device, cert_out, ca_cert, ca_key)
    if authority is not None and not 1 <= cert_days <= MAX_DAYS:
        fail(f"--cert-days: 1 to {MAX_DAYS}, not {cert_days}")

    async def go(platform: Platform) -> None:
        role: KeyRole = "device" if device else "tenant"
        tenant_id, new = await platform.create_key(tenant, device or label, role)
        kind = "device key" if device else "key"
        named = f" ({device})" if device else ""
        console.print(f"{kind} id [bold]{new.key_id}[/]{named} for tenant {tenant} ({tenant_id}):")
        console.print(new.plaintext, soft_wrap=True)
        console.print(f"[dim]in {installation_name(settings)}; store it now: voxwire keeps only "
                      "its hash[/]")  # fmt: skip
        store = await platform.adapters.store()
        secret = await store.webhook_secret(new.key_id)
        console.print("its webhook signing secret (`voxwire keys webhook-secret` shows it again):")
        console.print(secret, soft_wrap=True)
        if authority is not None and cert_out is not None:
            issued = issue(authority, new.key_id, now=dt.datetime.now(dt.UTC), days=cert_days)
            cert_path, key_path = write(issued, cert_out)
            console.print(
                f"client certificate {cert_path} (CN {new.key_id}, serial {issued.serial:x}, "
                f"until {issued.not_after:%Y-%m-%d}) and its key {key_path}"
            )

    _with_platform(settings, go)


def _device_authority(
    device: str | None, cert_out: Path | None, ca_cert: Path | None, ca_key: Path | None
) -> DeviceAuthority | None:
    """The device CA when a certificate is asked for; checked before any key is made."""
    if cert_out is None:
        return None
    if device is None:
        fail("--cert-out is for device keys", hint="add --device NAME")
    try:
        check_out_dir(cert_out)
    except VoxwireError as exc:
        fail(exc.message, exc.hint)
    return _load_authority(ca_cert, ca_key)


def _load_authority(ca_cert: Path | None, ca_key: Path | None) -> DeviceAuthority:
    if ca_cert is None or ca_key is None:
        fail(
            "a device certificate needs the device CA: --ca-cert and --ca-key",
            hint="scripts/services.sh env sets VOXWIRE_DEVICE_CA_CERT and VOXWIRE_DEVICE_CA_KEY"
            ' (set -a; eval "$(scripts/services.sh env)"; set +a)',
        )
    try:
        return DeviceAuthority.load(ca_cert, ca_key)
    except VoxwireError as exc:
        fail(exc.message, exc.hint)


@app.command("list")
def list_keys(distributed: DistributedOption = False) -> None:
    """List keys (ids and labels; never the keys themselves)."""
    settings = _settings(distributed)

    async def go(platform: Platform) -> None:
        store = await platform.adapters.store()
        table = Table("id", "tenant", "role", "label", "created", "revoked")
        table.title = f"API keys in {installation_name(settings)}"
        for key in await store.list_api_keys():
            table.add_row(
                key.id,
                key.tenant_id,
                key.role,
                key.label,
                f"{key.created_at:%Y-%m-%d %H:%M}",
                f"{key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "",
            )
        console.print(table)

    _with_platform(settings, go)


@app.command("webhook-secret")
def webhook_secret(
    key_id: Annotated[str, typer.Argument(help="the key id shown by `voxwire keys list`")],
    rotate: Annotated[
        bool,
        typer.Option(
            help="replace it with a new one: deliveries are signed with the new one from now on"
        ),
    ] = False,
    distributed: DistributedOption = False,
) -> None:
    """Print the secret that signs the webhooks of uploads made with key KEY_ID
    (docs/webhooks.md); --rotate replaces it first."""
    settings = _settings(distributed)

    async def go(platform: Platform) -> str | None:
        store = await platform.adapters.store()
        if await store.active_key(key_id) is None:
            return None
        return await store.webhook_secret(key_id, rotate=rotate)

    secret = _with_platform(settings, go)
    if secret is None:
        fail(
            f"no active key with id {key_id} in {installation_name(settings)}",
            hint="see `voxwire keys list" + (" --distributed`" if distributed else "`"),
        )
    console.print(secret, soft_wrap=True)


@app.command()
def revoke(
    key_id: Annotated[str, typer.Argument(help="the key id shown by `voxwire keys list`")],
    cert: Annotated[
        Path | None,
        typer.Option(
            help="the device's certificate (device.crt): add it to the device CA's revocation "
            "list too, so that Mosquitto refuses it at the TLS handshake",
            metavar="FILE",
        ),
    ] = None,
    crl: Annotated[
        Path | None,
        typer.Option(
            help="the revocation list to add it to (the listener's crlfile; made if missing)",
            envvar="VOXWIRE_DEVICE_CRL",
        ),
    ] = None,
    ca_cert: CaCertOption = None,
    ca_key: CaKeyOption = None,
    distributed: DistributedOption = False,
) -> None:
    """Revoke a key: requests and MQTT connections with it are refused from now on,
    and its open MQTT connections are closed (Mosquitto)."""
    settings = _settings(distributed)
    if cert is not None:
        _revoke_certificate(key_id, cert, crl, ca_cert, ca_key)

    async def go(platform: Platform) -> bool:
        return await platform.revoke_key(key_id)

    if not _with_platform(settings, go):
        if cert is not None:
            console.print(f"{key_id} was not an active key in {installation_name(settings)}")
            return
        fail(
            f"no active key with id {key_id} in {installation_name(settings)}",
            hint="see `voxwire keys list" + (" --distributed`" if distributed else "`"),
        )
    console.print(f"revoked {key_id}")


def _revoke_certificate(
    key_id: str, cert: Path, crl: Path | None, ca_cert: Path | None, ca_key: Path | None
) -> None:
    """Add the key's certificate to the revocation list (written before the key is
    revoked, so that a failure leaves the key as it was)."""
    if crl is None:
        fail("--cert needs --crl FILE (or VOXWIRE_DEVICE_CRL): the listener's crlfile")
    authority = _load_authority(ca_cert, ca_key)
    try:
        pem = cert.read_bytes()
        previous = crl.read_bytes() if crl.exists() else None
        named = x509.load_pem_x509_certificate(pem).subject
    except (OSError, ValueError) as exc:
        fail(f"cannot read {cert} or {crl}: {exc}")
    if [a.value for a in named.get_attributes_for_oid(NameOID.COMMON_NAME)] != [key_id]:
        fail(f"{cert} is not key {key_id}'s certificate ({named.rfc4514_string()})")
    try:
        done = add_to_crl(authority, pem, previous, now=dt.datetime.now(dt.UTC))
    except VoxwireError as exc:
        fail(exc.message, exc.hint)
    partial = crl.with_name(f".{crl.name}.new")
    partial.write_bytes(done.crl_pem)
    partial.chmod(0o644)
    partial.replace(crl)  # whole or not at all, for a broker that reads it meanwhile
    said = "was already in" if done.already else "added to"
    # soft_wrap: the path stays on one line, to be copied
    console.print(f"certificate serial {done.serial:x} {said} {crl}; make the broker read it "
                  "again (Mosquitto: SIGHUP; scripts/services.sh reload mosquitto)",
                  soft_wrap=True)  # fmt: skip
