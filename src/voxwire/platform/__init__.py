"""The composition root: wires adapters and services into a running platform.

``build(settings, roles)`` (:mod:`voxwire.platform.build`) returns a
:class:`~voxwire.platform.build.Platform` that runs the roles asked for on the
adapters the settings name; each setting is looked up in a name map::

    setting      map (module)         names
    bus          BUSES (choices)      memory | kafka
    store        STORES (choices)     sqlite | postgres (+ Redis stream checkpoints)
    search       SEARCHES (choices)   sqlite | opensearch
    blob_store   BLOBS (choices)      local  | s3
    broker       BROKERS (brokers)    embedded | external (mqtt_url)
    engine       voxwire.workers.engines.create_engine

``mode`` is a preset of those settings (``voxwire.core.config.PRESETS``):
``embedded`` runs every role in one process (``voxwire up``), ``distributed``
one role per process (``voxwire gateway|worker|bridge``) on shared servers.
What is wired to what::

     clients ──MQTT──> broker ──ingest──> bus: audio, control, prompt queries
         ^                                 │
         │                                 v
         │             ┌──── worker ─── FileWorker, StreamWorker (engines)
         │             │        │  <── blobs (uploaded audio)
         │             │        v
         │             │      bus: results, windows
         │             │        │
         │             │        v
         └── broker <──┴─ bridge: ResultRelay ──> store
                                  SegmentIndexer ──> search
                                  QueryService <── search, store
     HTTP ──> gateway ──> store, bus (jobs, stream starts), blobs, search,
                          access (broker rules: dynsec, or none for the embedded broker)

Modules: :mod:`~voxwire.platform.choices` (the name maps),
:mod:`~voxwire.platform.brokers` (the broker and how services reach it),
:mod:`~voxwire.platform.adapters` (open once, close in reverse order),
:mod:`~voxwire.platform.roles` (start each role; which roles may run apart),
:mod:`~voxwire.platform.build` (:func:`build`, :class:`Platform`).
"""

from voxwire.platform.build import Bootstrap, Platform, build
from voxwire.platform.roles import ROLES, Role

__all__ = ["ROLES", "Bootstrap", "Platform", "Role", "build"]
