"""``voxwire tenants``: list tenants, show one with its quotas and their use, set
and clear quotas; ``voxwire usage``: audio transcribed, by day, tenant, key,
model and kind.

Like ``voxwire keys``, the commands work on the store the settings name (the
embedded SQLite store, or with ``--distributed`` the distributed mode's
PostgreSQL). A tenant is named by its name or its id. Quotas are described in
:mod:`voxwire.access.quotas`; none set means unlimited. The command line takes
hours, megabytes and minutes where the store keeps seconds and bytes.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from voxwire.access.quotas import QUOTA_NAMES, QuotaName, parse_name
from voxwire.cli.common import console, fail
from voxwire.cli.installation import installation_name
from voxwire.cli.keys import DistributedOption, _settings, _with_platform
from voxwire.sessions.quotas import QuotaGuard

if TYPE_CHECKING:
    from voxwire.platform import Platform
    from voxwire.store import Store, Tenant

app = typer.Typer(help="Tenants and their quotas.", no_args_is_help=True)

TenantArg = Annotated[str, typer.Argument(help="the tenant's name or id")]
KeyOption = Annotated[
    str | None,
    typer.Option("--key", help="the quota of this key of the tenant only (its id)"),
]


async def _tenant(store: Store, name_or_id: str) -> Tenant:
    found = await store.get_tenant(name_or_id) or await store.tenant_by_name(name_or_id)
    if found is None:
        fail(f"no tenant {name_or_id!r}", hint="see `voxwire tenants list`")
    return found


async def _check_key(store: Store, tenant: Tenant, key_id: str | None) -> None:
    if key_id is None:
        return
    keys = {k.id for k in await store.list_api_keys() if k.tenant_id == tenant.id}
    if key_id not in keys:
        fail(f"tenant {tenant.name} has no key {key_id}", hint="see `voxwire keys list`")


@app.command("list")
def list_tenants(distributed: DistributedOption = False) -> None:
    """List the tenants and how many quotas each has."""
    settings = _settings(distributed)

    async def go(platform: Platform) -> None:
        store = await platform.adapters.store()
        table = Table("id", "name", "created", "quotas")
        table.title = f"tenants in {installation_name(settings)}"
        for tenant in await store.list_tenants():
            count = len(await store.quotas(tenant.id))
            table.add_row(
                tenant.id,
                tenant.name,
                f"{tenant.created_at:%Y-%m-%d %H:%M}",
                str(count) if count else "none (unlimited)",
            )
        console.print(table)

    _with_platform(settings, go)


@app.command()
def show(tenant: TenantArg, distributed: DistributedOption = False) -> None:
    """A tenant's quotas with their current use."""
    settings = _settings(distributed)

    async def go(platform: Platform) -> None:
        store = await platform.adapters.store()
        found = await _tenant(store, tenant)
        console.print(f"tenant [bold]{found.name}[/] ({found.id}) in {installation_name(settings)}")
        report = await QuotaGuard(store).report(found.id)
        if not report:
            console.print("no quotas: unlimited")
            return
        table = Table("quota", "scope", "limit", "used", "resets")
        for quota in report:
            scope = f"key {quota.key_id}" if quota.key_id else "tenant"
            used = "" if quota.used is None else f"{quota.used:g}"
            resets = f"{quota.resets_at:%Y-%m-%d %H:%M} UTC" if quota.resets_at else ""
            table.add_row(quota.quota, scope, str(quota.limit), used, resets)
        console.print(table)

    _with_platform(settings, go)


def _limits(
    live_streams: int | None,
    uploads_in_flight: int | None,
    audio_hours_per_day: float | None,
    audio_hours_per_month: float | None,
    upload_mb: float | None,
    upload_minutes: float | None,
) -> dict[QuotaName, int]:
    given: dict[QuotaName, float | None] = {
        "live_streams": live_streams,
        "uploads_in_flight": uploads_in_flight,
        "audio_seconds_per_day": None
        if audio_hours_per_day is None
        else audio_hours_per_day * 3600,
        "audio_seconds_per_month": (
            None if audio_hours_per_month is None else audio_hours_per_month * 3600
        ),
        "upload_bytes": None if upload_mb is None else upload_mb * 1024 * 1024,
        "upload_seconds": None if upload_minutes is None else upload_minutes * 60,
    }
    limits = {name: round(value) for name, value in given.items() if value is not None}
    if not limits:
        fail("no quota given", hint="e.g. --live-streams 5 --audio-hours-per-day 10")
    if any(value < 0 for value in limits.values()):
        fail("a quota cannot be negative", hint="0 refuses everything; clear-quota lifts it")
    return limits


@app.command("set-quota")
def set_quota(
    tenant: TenantArg,
    key: KeyOption = None,
    live_streams: Annotated[int | None, typer.Option(help="live streams at once")] = None,
    uploads_in_flight: Annotated[
        int | None, typer.Option(help="file jobs (uploads, re-transcriptions) queued or running")
    ] = None,
    audio_hours_per_day: Annotated[
        float | None, typer.Option(help="audio transcribed per UTC day, in hours")
    ] = None,
    audio_hours_per_month: Annotated[
        float | None, typer.Option(help="audio transcribed per UTC month, in hours")
    ] = None,
    upload_mb: Annotated[float | None, typer.Option(help="the largest upload, in MiB")] = None,
    upload_minutes: Annotated[
        float | None, typer.Option(help="the longest upload, in minutes of audio")
    ] = None,
    distributed: DistributedOption = False,
) -> None:
    """Set quotas of a tenant (or, with --key, of one of its keys); others stay as they are."""
    settings = _settings(distributed)
    limits = _limits(
        live_streams,
        uploads_in_flight,
        audio_hours_per_day,
        audio_hours_per_month,
        upload_mb,
        upload_minutes,
    )

    async def go(platform: Platform) -> None:
        store = await platform.adapters.store()
        found = await _tenant(store, tenant)
        await _check_key(store, found, key)
        for name, value in limits.items():
            await store.set_quota(found.id, key, name, value)
        whose = f"key {key} of tenant {found.name}" if key else f"tenant {found.name}"
        said = ", ".join(f"{name}={value}" for name, value in limits.items())
        console.print(f"{whose}: {said}")

    _with_platform(settings, go)


@app.command("clear-quota")
def clear_quota(
    tenant: TenantArg,
    names: Annotated[
        list[str] | None,
        typer.Argument(help=f"quotas to lift (default: all): {', '.join(QUOTA_NAMES)}"),
    ] = None,
    key: KeyOption = None,
    distributed: DistributedOption = False,
) -> None:
    """Lift quotas of a tenant (or, with --key, of one of its keys): unlimited again."""
    settings = _settings(distributed)
    try:
        chosen = [parse_name(name) for name in names or ()]
    except ValueError as exc:
        fail(str(exc))

    async def go(platform: Platform) -> None:
        store = await platform.adapters.store()
        found = await _tenant(store, tenant)
        removed = await store.clear_quotas(found.id, key, chosen)
        whose = f"key {key} of tenant {found.name}" if key else f"tenant {found.name}"
        console.print(f"{whose}: {removed} quota(s) lifted")

    _with_platform(settings, go)


def _day(text: str | None, option: str) -> dt.date | None:
    if text is None:
        return None
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        fail(f"{option} {text!r} is not a date", hint="write it YYYY-MM-DD (UTC days)")


def usage(
    tenant: Annotated[
        str | None, typer.Option(help="one tenant (name or id); default: all")
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="first UTC day, YYYY-MM-DD [this month's first]")
    ] = None,
    until: Annotated[str | None, typer.Option(help="last UTC day, YYYY-MM-DD [today]")] = None,
    distributed: DistributedOption = False,
) -> None:
    """Audio transcribed, by day, tenant, key, model and kind (file, live, retranscription)."""
    settings = _settings(distributed)
    last = _day(until, "--until") or dt.datetime.now(dt.UTC).date()
    first = _day(since, "--since") or last.replace(day=1)
    if first > last:
        fail(f"--since {first} is after --until {last}")

    async def go(platform: Platform) -> None:
        store = await platform.adapters.store()
        tenant_id = (await _tenant(store, tenant)).id if tenant else None
        names = {t.id: t.name for t in await store.list_tenants()}
        rows = await store.usage(tenant_id, first, last)
        table = Table("day", "tenant", "key", "model", "kind", "sessions", "audio (h:mm:ss)")
        table.title = f"usage {first} to {last} in {installation_name(settings)}"
        for row in rows:
            table.add_row(
                f"{row.day}",
                names.get(row.tenant_id, row.tenant_id),
                row.key_id or "",
                row.model,
                row.kind,
                str(row.sessions),
                _hours(row.audio_seconds),
            )
        total = sum(row.audio_seconds for row in rows)
        table.add_section()
        table.add_row("total", "", "", "", "", str(sum(r.sessions for r in rows)), _hours(total))
        console.print(table)

    _with_platform(settings, go)


def _hours(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
