"""Opening and reading sessions, independent of the transport that asks:
the gateway serves them over HTTP, the bridge over MQTT (``query/<key id>/...``,
:mod:`voxwire.bridge.queries`).

- :mod:`~voxwire.sessions.opening`: what every new session needs (its record,
  its topics opened to its tenant, its first message);
- :mod:`~voxwire.sessions.uploads` and :mod:`~voxwire.sessions.streams`: an
  uploaded file's job, a live stream's start and prompt changes;
- :mod:`~voxwire.sessions.languages`: the models served and the languages they speak;
- :mod:`~voxwire.sessions.views`: what a client is told about a session;
- :mod:`~voxwire.sessions.audio`: a session's stored audio (redacted where its
  transcript is), as playback sends it;
- :mod:`~voxwire.sessions.deletion`: deleting a session everywhere (a request,
  retention), with a tombstone first.
"""
