"""The bus topics, by name: the one place that spells them.

========================  ======  =====================================  ======================
topic                     key     record                                 from -> to
========================  ======  =====================================  ======================
``transcription.jobs``    sid     :class:`~voxwire.wire.records.FileJob`  gateway -> worker
``transcription.rejobs``  sid     :class:`~voxwire.wire.records.FileJob`  gateway -> worker
``transcription.results`` sid     a contract message                     workers -> bridge
``transcription.windows`` sid     :class:`~voxwire.wire.windows.TextWindow`  workers -> indexer
``prompt.queries``        key id  a client's query request               ingest -> queries
``transcription.audio``   sid     a stream start, a client's audio       gateway, ingest -> worker
========================  ======  =====================================  ======================

Partitions, retention and their creation on Kafka: :mod:`voxwire.bus.topics`.
"""

JOBS_TOPIC = "transcription.jobs"
REJOBS_TOPIC = "transcription.rejobs"
"""Re-transcriptions: the low-priority lane, taken only when a worker has nothing
else to do (:mod:`voxwire.workers.files.worker`)."""
RESULTS_TOPIC = "transcription.results"
WINDOWS_TOPIC = "transcription.windows"
QUERIES_TOPIC = "prompt.queries"
AUDIO_TOPIC = "transcription.audio"
