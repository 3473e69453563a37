"""Uploaded files: the worker that consumes file jobs (:mod:`~.worker`), its lanes for
uploads and re-transcriptions (:mod:`~.lanes`), and one job's transcription
(:mod:`~.job`, with speech the VAD missed recovered by :mod:`~.skipped_speech`)."""
