"""Persistence: tenants, API keys, sessions, the message log and transcripts.

:class:`Store` is the interface; :class:`SqliteStore` serves embedded mode.
"""

from voxwire.store.base import ApiKeyInfo, SessionRecord, SessionState, Store, Tenant
from voxwire.store.sqlite import SqliteStore

__all__ = ["ApiKeyInfo", "SessionRecord", "SessionState", "SqliteStore", "Store", "Tenant"]
