"""``voxwire stream``: play a file over MQTT in real time, as a device would."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.markup import escape

from voxwire.audio.codecs import opus_packets, sample_chunks
from voxwire.audio.decoding import decode
from voxwire.cli.common import (
    KeepOriginalOption,
    RedactOption,
    TranslateOption,
    VocabularyOption,
    console,
    fail,
    task_of,
    transcript_title,
)
from voxwire.core.errors import VoxwireError
from voxwire_client import AsyncClient, ClientError, StreamRequest, Transcript
from voxwire_client.api import OPUS_FRAME_MS, AudioEncoding, PromptSpec
from voxwire_client.messages import MatchMessage, Message, ProgressMessage, SegmentMessage
from voxwire_client.options import Endpointing, EndpointingPolicy


def stream(
    file: Annotated[
        Path,
        typer.Argument(
            help="audio file to play as a live stream", exists=True, dir_okay=False, readable=True
        ),
    ],
    prompt: Annotated[
        list[str] | None, typer.Option("--prompt", "-p", help="a phrase to listen for (repeatable)")
    ] = None,
    speed: Annotated[float, typer.Option(help="play faster than real time (e.g. 4)")] = 1.0,
    min_silence_ms: Annotated[
        int | None, typer.Option(help="silence that ends a segment, ms [600]")
    ] = None,
    endpointing: Annotated[
        EndpointingPolicy | None,
        typer.Option(
            help="when a final goes out: fast (as a finished sentence pauses), balanced "
            "(after --min-silence-ms) or patient (after 1 s) [the platform's]"
        ),
    ] = None,
    language: Annotated[
        str | None,
        typer.Option(help="a language code such as de, or auto [en; with --translate: auto]"),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="one of the models the platform serves [its default]")
    ] = None,
    encoding: Annotated[
        AudioEncoding,
        typer.Option(
            "--encoding",
            "--codec",
            help="pcm16 (256 kbit/s at 16 kHz), opus (compressed, see --bitrate), "
            "mulaw or alaw (G.711, the telephone's 64 kbit/s at 8 kHz)",
        ),
    ] = AudioEncoding.PCM16,
    sample_rate: Annotated[
        int | None,
        typer.Option(help="samples per second to send at [pcm16 16000, mulaw/alaw 8000]"),
    ] = None,
    bitrate: Annotated[
        int, typer.Option(help="with --encoding opus: bits per second (16000-24000 suit speech)")
    ] = 24_000,
    frame_ms: Annotated[
        int, typer.Option(help="with --encoding opus: ms of audio per packet, one chunk each")
    ] = 20,
    redact: RedactOption = None,
    keep_original_audio: KeepOriginalOption = False,
    vocabulary: VocabularyOption = None,
    translate: TranslateOption = False,
    url: Annotated[str | None, typer.Option(help="gateway URL [env VOXWIRE_URL]")] = None,
    api_key: Annotated[str | None, typer.Option(help="API key [env VOXWIRE_API_KEY]")] = None,
    mqtt_url: Annotated[str | None, typer.Option(help="broker URL [env VOXWIRE_MQTT_URL]")] = None,
) -> None:
    """Stream FILE over MQTT as a device would (PCM16LE or G.711 chunks of 100 ms,
    or Opus packets); print partials (…) and finals live."""
    if speed <= 0:
        fail("--speed must be positive", hint="1 is real time, 4 is four times faster")
    if frame_ms not in OPUS_FRAME_MS:
        fail(f"--frame-ms {frame_ms} is not an Opus frame", hint=f"use one of {OPUS_FRAME_MS}")
    if not 6_000 <= bitrate <= 510_000:
        fail(
            f"--bitrate {bitrate} is outside Opus's range",
            hint="use 6000 to 510000; 24000 suits speech",
        )
    try:
        samples = decode(file.read_bytes()).samples
    except VoxwireError as exc:
        fail(exc.message, exc.hint)
    try:
        request = StreamRequest(
            encoding=encoding,
            sample_rate=sample_rate,
            frame_ms=frame_ms,
            prompts=tuple(PromptSpec(id=f"p{i + 1}", text=t) for i, t in enumerate(prompt or [])),
            endpointing=Endpointing(
                **({"min_silence_ms": min_silence_ms} if min_silence_ms is not None else {}),
                **({"policy": endpointing} if endpointing is not None else {}),
            ),
            language=language or None,
            model=model,
            redact=redact,
            keep_original_audio=keep_original_audio,
            vocabulary=tuple(vocabulary or ()),
            task=task_of(translate),
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        fail(f"{where}: {first['msg']}", hint="see voxwire stream --help")
    if encoding is AudioEncoding.OPUS:
        chunks, chunk_ms = list(opus_packets(samples, bitrate=bitrate, frame_ms=frame_ms)), frame_ms
    else:
        chunks, chunk_ms = sample_chunks(samples, encoding, request.rate), 100
    try:
        result = asyncio.run(_run(chunks, chunk_ms, request, speed, url, api_key, mqtt_url))
    except ClientError as exc:
        fail(exc.message, exc.hint)
    console.rule(transcript_title(result.language, result.task))
    console.print(result.text)


async def _run(
    chunks: list[bytes],
    chunk_ms: int,
    request: StreamRequest,
    speed: float,
    url: str | None,
    api_key: str | None,
    mqtt_url: str | None,
) -> Transcript:
    status = console.status("listening…")

    def on_event(message: Message) -> None:
        if isinstance(message, SegmentMessage):
            text = escape(message.segment.text)
            if message.type == "partial":
                status.update(f"[dim]{text} …[/]")
            else:
                latency = message.latency
                took = (
                    f" [dim]({latency.vad_ms + latency.queue_ms + latency.transcribe_ms} ms)[/]"
                    if latency
                    else ""
                )
                at = f"{message.segment.start_ms / 1000:7.2f}s"
                if message.segment.continues:  # the utterance of the line before goes on
                    at = " " * len(at) + "…"
                console.print(f"[cyan]{at}[/] {text}{took}")
                status.update("listening…")
        elif isinstance(message, ProgressMessage) and message.speech is not None:
            lag = f" · lag {message.lag_ms} ms" if message.lag_ms else ""
            if message.partials_skipped:
                lag += f" · {message.partials_skipped} partials skipped (busy)"
            status.update(("speaking…" if message.speech else "listening…") + lag)
        elif isinstance(message, MatchMessage):
            console.print(f"[magenta]match[/] {message.prompt!r} at {message.start_ms / 1000:.2f}s")

    async with AsyncClient(url, api_key, mqtt_url) as client:
        with status:
            return await client.stream(
                chunks, request, chunk_ms=chunk_ms, speed=speed, on_event=on_event
            )
