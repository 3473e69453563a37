"""Which installation a process serves, as the client config names it, and the
key the client config should hold for it.

An installation is named by where its API keys live (a key is valid in one
store only): ``sqlite:<data_dir>/voxwire.sqlite3`` embedded,
``postgres://<host>:<port>/<database>`` distributed, with ``?namespace=<ns>``
when the settings have one. ``voxwire up`` writes its entry under that name
(:func:`voxwire_client.config.save_config`), so ``make run`` and ``make
run-distributed`` on one machine keep a key each.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from voxwire.access.keys import NewKey
from voxwire.core.config import Settings
from voxwire_client.config import config_path, installations
from voxwire_client.errors import ConfigurationError

if TYPE_CHECKING:
    from voxwire.platform import Platform
    from voxwire.store import Store


def installation_name(settings: Settings) -> str:
    """Where the keys of the installation ``settings`` describe live (no secrets)."""
    if settings.store == "sqlite":
        return f"sqlite:{settings.db_path}"
    parts = urlsplit(settings.servers.postgres_dsn.get_secret_value())
    where = "postgres://"
    if parts.scheme in ("postgres", "postgresql"):  # else a key=value DSN: not parsed here
        where += f"{parts.hostname or 'localhost'}:{parts.port or 5432}{parts.path or '/'}"
    return f"{where}?namespace={settings.namespace}" if settings.namespace else where


async def known_key(store: Store, settings: Settings) -> str | None:
    """A tenant key that ``store`` accepts (a device key cannot serve the CLI), from
    the client config: this installation's entry first, then ``VOXWIRE_API_KEY``,
    then any other entry (a first-format file's only key, which then moves under
    this installation's name)."""
    try:
        _, entries = installations(config_path())
    except ConfigurationError:
        entries = {}  # unreadable: the new entry replaces it
    own = entries.pop(installation_name(settings), None)
    candidates = [own.api_key if own else None, os.environ.get("VOXWIRE_API_KEY")]
    candidates += [entry.api_key for entry in reversed(entries.values())]
    for key in candidates:
        grant = await store.key_grant(key) if key else None
        if grant is not None and not grant.device:
            return key
    return None


async def client_key(platform: Platform) -> tuple[str, NewKey | None]:
    """The key for this installation's client config: one it already holds that
    the store accepts (registered with the broker again, in case the broker lost
    it), else a new key of the default tenant; (key, the new key or None)."""
    from voxwire.platform.build import DEFAULT_TENANT

    store = await platform.adapters.store()
    known = await known_key(store, platform.settings)
    if known is None:
        _, new = await platform.create_key(DEFAULT_TENANT, "created by voxwire up")
        return new.plaintext, new
    grant = await store.key_grant(known)
    if grant is not None:
        await (await platform.adapters.access()).add_key(grant.tenant_id, grant.key_id, known)
    return known, None
