"""The gateway's HTTP routes, one :class:`fastapi.APIRouter` per resource:
:mod:`.health` (health, readiness, metrics), :mod:`.uploads` (a file becomes a
session), :mod:`.streams` (live streams and their prompts), :mod:`.telephony` (a
telephony platform's media stream of a call, protocol in
:mod:`voxwire.gateway.media_stream`), :mod:`.sessions` (a
session's status, transcript, messages, audio, re-transcription), :mod:`.search`,
:mod:`.tokens`, :mod:`.usage` (usage and quotas), :mod:`.openai` (OpenAI's audio API, its shapes in
:mod:`voxwire.gateway.openai_api`) and :mod:`.deepgram`, :mod:`.deepgram_live`
(Deepgram's listening API, pre-recorded and live; its shapes in
:mod:`voxwire.gateway.deepgram_api`). The EMQX hooks are :mod:`voxwire.gateway.emqx`.
"""
