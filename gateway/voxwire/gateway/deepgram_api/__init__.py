"""Deepgram's listening API spoken by the gateway (the routes are
:mod:`voxwire.gateway.routes.deepgram`): :mod:`.params` (its query parameters,
parsed once into the session's options and how its answers are shaped),
:mod:`.shapes` (its messages and response bodies), :mod:`.live` (a live
connection without I/O: client frames in, audio chunks and Deepgram messages
out), :mod:`.prerecorded` (a transcript as the pre-recorded response),
:mod:`.errors` (its error body and statuses)."""
