"""Live streams: a worker takes streams off the bus (:mod:`~.worker`), orders and
decodes their chunks (:mod:`~.intake`, :mod:`~.audio`), finds the ends of
utterances (:mod:`~.endpointing`), schedules the engine among streams
(:mod:`~.scheduler`, :mod:`~.queue`, :mod:`~.lead`), turns decodes into partials and
finals (:mod:`~.session`), keeps resume points (:mod:`~.checkpoints`) and archives the
audio for re-transcription (:mod:`~.archive`). :mod:`~.config` holds a stream's
settings."""
