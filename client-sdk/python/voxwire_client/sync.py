"""``Client``: the SDK for synchronous code, :class:`~voxwire_client.client.AsyncClient`
run on a private event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Self

from voxwire_client.api import (
    PromptChange,
    PromptSpec,
    RedactMode,
    SearchPage,
    SearchQuery,
    SessionCreated,
    SessionInfo,
    SpeakerBounds,
    StreamControl,
    StreamRequest,
    TokenResponse,
    TranscriptFormat,
    TranscriptResponse,
)
from voxwire_client.client import AsyncClient, Transcript
from voxwire_client.messages import Message, Task
from voxwire_client.options import SessionOptions
from voxwire_client.uploads import Prompts
from voxwire_client.versions import RetranscribeAccepted


class Client:
    """Synchronous facade over :class:`AsyncClient`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._async = AsyncClient(*args, **kwargs)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._loop.run_until_complete(self._async.aclose())
        self._loop.close()

    def upload(
        self,
        path: str | Path,
        prompts: Prompts = None,
        *,
        redact: RedactMode | str | None = None,
        language: str | None = None,
        model: str | None = None,
        diarize: SpeakerBounds | bool = False,
        vocabulary: Sequence[str] = (),
        task: Task | str = Task.TRANSCRIBE,
        keep_original_audio: bool = False,
        options: SessionOptions | None = None,
        callback: str | None = None,
    ) -> SessionCreated:
        """As :meth:`AsyncClient.upload`: ``options`` (e.g. separate channels with
        their labels) stand for all the keywords."""
        uploading = self._async.upload(
            path,
            prompts,
            redact=redact,
            language=language,
            model=model,
            diarize=diarize,
            vocabulary=vocabulary,
            task=task,
            keep_original_audio=keep_original_audio,
            options=options,
            callback=callback,
        )
        return self._loop.run_until_complete(uploading)

    def session(self, sid: str) -> SessionInfo:
        return self._loop.run_until_complete(self._async.session(sid))

    def delete(self, sid: str) -> None:
        """Delete the session everywhere (see :meth:`AsyncClient.delete`)."""
        self._loop.run_until_complete(self._async.delete(sid))

    def audio(self, sid: str, *, original: bool = False) -> bytes:
        return self._loop.run_until_complete(self._async.audio(sid, original=original))

    def transcript(self, sid: str) -> TranscriptResponse:
        return self._loop.run_until_complete(self._async.transcript(sid))

    def transcript_as(self, sid: str, format: TranscriptFormat | str) -> str:
        return self._loop.run_until_complete(self._async.transcript_as(sid, format))

    def transcript_version(self, sid: str, version: int) -> TranscriptResponse:
        return self._loop.run_until_complete(self._async.transcript_version(sid, version))

    def retranscribe(
        self,
        sid: str,
        *,
        model: str | None = None,
        language: str | None = None,
        vocabulary: Sequence[str] = (),
        task: Task | None = None,
    ) -> RetranscribeAccepted:
        """Queue the next transcript version of ``sid``; :meth:`wait_version` waits for it."""
        again = self._async.retranscribe(
            sid, model=model, language=language, vocabulary=vocabulary, task=task
        )
        return self._loop.run_until_complete(again)

    def wait_version(self, accepted: RetranscribeAccepted) -> list[Message]:
        """Every message of the version ``accepted`` makes, once it has ended."""

        async def collect() -> list[Message]:
            return [m async for m in self._async.version_events(accepted)]

        return self._loop.run_until_complete(collect())

    def change_prompts(
        self, sid: str, add: Sequence[PromptSpec] = (), remove: Sequence[str] = ()
    ) -> PromptChange:
        return self._loop.run_until_complete(self._async.change_prompts(sid, add, remove))

    def search(self, query: SearchQuery | str, **filters: Any) -> SearchPage:
        return self._loop.run_until_complete(self._async.search(query, **filters))

    def create_token(self, sids: Sequence[str], ttl_s: int = 3600) -> TokenResponse:
        return self._loop.run_until_complete(self._async.create_token(sids, ttl_s))

    def transcribe(
        self,
        path: str | Path,
        prompts: Prompts = None,
        *,
        on_event: Callable[[Message], None] | None = None,
        redact: RedactMode | str | None = None,
        language: str | None = None,
        model: str | None = None,
        vocabulary: Sequence[str] = (),
        task: Task | str = Task.TRANSCRIBE,
    ) -> Transcript:
        transcribing = self._async.transcribe(
            path,
            prompts,
            on_event=on_event,
            redact=redact,
            language=language,
            model=model,
            vocabulary=vocabulary,
            task=task,
        )
        return self._loop.run_until_complete(transcribing)

    def stream(
        self,
        chunks: Iterable[bytes | StreamControl],
        request: StreamRequest | None = None,
        *,
        chunk_ms: int = 100,
        speed: float = 1.0,
        on_event: Callable[[Message], None] | None = None,
    ) -> Transcript:
        return self._loop.run_until_complete(
            self._async.stream(chunks, request, chunk_ms=chunk_ms, speed=speed, on_event=on_event)
        )

    def events(self, sid: str, *, after_seq: int = 0) -> Iterator[Message]:
        stream = self._async.events(sid, after_seq=after_seq)
        try:
            while True:
                try:
                    yield self._loop.run_until_complete(anext(stream))
                except StopAsyncIteration:
                    return
        finally:
            self._loop.run_until_complete(stream.aclose())
