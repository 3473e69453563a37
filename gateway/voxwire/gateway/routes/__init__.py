"""The gateway's HTTP routes, one :class:`fastapi.APIRouter` per resource:
:mod:`.health` (health, readiness, metrics), :mod:`.uploads` (a file becomes a
session), :mod:`.streams` (live streams and their prompts), :mod:`.sessions` (a
session's status, transcript, messages, audio, re-transcription), :mod:`.search`
and :mod:`.tokens`. The EMQX hooks are :mod:`voxwire.gateway.emqx`.
"""
