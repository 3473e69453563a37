"""Generate the published contract: an AsyncAPI 3.0 document and JSON Schemas.

Both are derived from the pydantic models in ``voxwire_client`` and committed
under ``client-sdk/contract``; a test fails when they drift.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from voxwire_client import api
from voxwire_client.messages import (
    CONTRACT_VERSION,
    ErrorMessage,
    MatchMessage,
    ProgressMessage,
    SegmentMessage,
    TranscriptMessage,
)
from voxwire_client.topics import TopicKind
from voxwire_client.usage import UsageReport
from voxwire_client.webhooks import WebhookEvent

MESSAGES: dict[str, type[BaseModel]] = {
    "ProgressMessage": ProgressMessage,
    "SegmentMessage": SegmentMessage,
    "TranscriptMessage": TranscriptMessage,
    "MatchMessage": MatchMessage,
    "ErrorMessage": ErrorMessage,
}

HTTP_BODIES: dict[str, type[BaseModel]] = {
    "SessionCreated": api.SessionCreated,
    "StreamRequest": api.StreamRequest,
    "StreamCreated": api.StreamCreated,
    "SessionInfo": api.SessionInfo,
    "TranscriptResponse": api.TranscriptResponse,
    "MessagesPage": api.MessagesPage,
    "ErrorBody": api.ErrorBody,
    "PromptChange": api.PromptChange,
    "SearchQuery": api.SearchQuery,
    "SearchPage": api.SearchPage,
    "QueryResult": api.QueryResult,
    "OpenStream": api.OpenStream,
    "GetTranscript": api.GetTranscript,
    "UploadStatus": api.UploadStatus,
    "FinishUpload": api.FinishUpload,
    "DeleteSession": api.DeleteSession,
    "UsageReport": UsageReport,
    "WebhookEvent": WebhookEvent,
}

_TOPIC_MESSAGES = {
    TopicKind.RESULT: ["SegmentMessage", "TranscriptMessage"],
    TopicKind.PROGRESS: ["ProgressMessage", "ErrorMessage"],
    TopicKind.MATCH: ["MatchMessage"],
}

_TOPIC_DOCS = {
    TopicKind.RESULT: "Final (and, for live streams, partial) segments as they are committed, "
    "then the complete transcript once.",
    TopicKind.PROGRESS: "Session status and percent of audio processed; errors.",
    TopicKind.MATCH: "A prompt given with the session was heard: where and how sure.",
}


_SID = {"sid": {"description": "session id from POST /v1/streams"}}
_AUDIO_CHANNELS: dict[str, Any] = {
    "audioChunk": {
        "address": "audio/{sid}/chunk/{n}",
        "description": "Live audio in the stream's encoding and sample_rate: by default "
        "PCM16LE, 16 kHz, mono, raw bytes (e.g. 100 ms = 3200 bytes); mulaw/alaw: G.711 "
        "bytes (8 kHz: 20 ms = 160 bytes); opus: one packet; with channels separate, "
        "interleaved frames of the channels (pcm16, mulaw, alaw). Well under 1 MB. n counts "
        "chunks from 0 without gaps; a repeated n (QoS 1 redelivery) is ignored, a gap or "
        "odd byte count is answered with an error message on transcription/{sid}/progress. "
        "Start the session first with POST /v1/streams (language, prompts, encoding, "
        "sample_rate, min_silence_ms, min_speech_ms, partial_interval_s, max_segment_s, "
        "vad_threshold).",
        "parameters": {**_SID, "n": {"description": "chunk number, 0, 1, 2, ..."}},
        "messages": {"AudioChunk": {"$ref": "#/components/messages/AudioChunk"}},
        "bindings": {"mqtt": {"qos": 1, "retain": False}},
    },
    "audioControl": {
        "address": "audio/{sid}/control",
        "description": 'End of the stream: {"type": "end"}. The last final, the transcript '
        'and a completed progress message follow. Or {"type": "flush"}: close the open '
        "utterance now; its final (flushed: true) follows and the stream goes on. Or "
        '{"type": "prompts", "add": [...], '
        '"remove": [...]} (PromptChange): change the standing prompts from the next final on; '
        "a change that cannot be applied is answered with an error message.",
        "parameters": _SID,
        "messages": {"StreamControl": {"$ref": "#/components/messages/StreamControl"}},
        "bindings": {"mqtt": {"qos": 1, "retain": False}},
    },
}


def _query_channel(
    kind: str, messages: tuple[str, ...], retain: bool, description: str
) -> dict[str, Any]:
    return {
        "address": f"query/{{keyId}}/{{qid}}/{kind}",
        "description": description,
        "parameters": {
            "keyId": {"description": "the id of the asking API key (vxk_<key id>_...)"},
            "qid": {"description": "the asker's id for this query: 1-64 of [A-Za-z0-9_-]"},
        },
        "messages": {m: {"$ref": f"#/components/messages/{m}"} for m in messages},
        "bindings": {"mqtt": {"qos": 1, "retain": retain}},
    }


_AUDIO_CHANNELS["queryRequest"] = _query_channel(
    "request",
    ("SearchQuery", "OpenStream", "GetTranscript", "UploadStatus", "FinishUpload", "DeleteSession"),
    False,
    "A request of the key's tenant, over MQTT alone: search its transcripts (a SearchQuery, "
    'the body of POST /v1/search), open a live stream ({"op": "open_stream", "stream": '
    'StreamRequest}: the same qid opens the same stream), read a transcript ({"op": '
    '"transcript", "sid": ...}), or ask which parts of a file uploaded over MQTT are held '
    '({"op": "upload_status"}) and transcribe it once all are ({"op": "finish_upload"}), '
    'or delete a session everywhere ({"op": "delete_session", "sid": ...}). '
    "A key may use only its own query topics. MQTT 5: a "
    "response topic (one of the key's result topics) and correlation data are honoured.",
)
_AUDIO_CHANNELS["uploadPart"] = {
    "address": "query/{keyId}/{upload}/part/{n}",
    "description": "Part n (0, 1, ... at most 9999) of a recorded file uploaded over MQTT: "
    "raw bytes, at most 256 KiB. The upload id is the device's choice; a part sent again "
    "is kept once. A part that cannot be kept is answered with an error on "
    "query/{keyId}/{upload}/result; then finish_upload.",
    "parameters": {
        "keyId": {"description": "the id of the uploading API key (vxk_<key id>_...)"},
        "upload": {"description": "the upload's id: 1-64 of [A-Za-z0-9_-]"},
        "n": {"description": "part number, 0, 1, 2, ..."},
    },
    "messages": {"UploadPart": {"$ref": "#/components/messages/UploadPart"}},
    "bindings": {"mqtt": {"qos": 1, "retain": False}},
}
_AUDIO_CHANNELS["queryResult"] = _query_channel(
    "result",
    ("QueryResult",),
    True,
    "The answer: a QueryResult with a page of hits, the stream opened (sid and audio "
    "topics), the transcript, the session deleted, or an error. QoS 1, retained for 60 s "
    "(message expiry), so subscribing after asking works too.",
)
_AUDIO_OPERATIONS: dict[str, Any] = {
    "sendAudio": {"action": "send", "channel": {"$ref": "#/channels/audioChunk"}},
    "sendControl": {"action": "send", "channel": {"$ref": "#/channels/audioControl"}},
    "sendQuery": {"action": "send", "channel": {"$ref": "#/channels/queryRequest"}},
    "sendUploadPart": {"action": "send", "channel": {"$ref": "#/channels/uploadPart"}},
    "receiveQueryResult": {"action": "receive", "channel": {"$ref": "#/channels/queryResult"}},
}
_AUDIO_MESSAGES: dict[str, Any] = (
    {
        name: {
            "name": name,
            "contentType": "application/json",
            "payload": {"$ref": f"schemas/{name}.schema.json"},
        }
        for name in (
            "SearchQuery",
            "OpenStream",
            "GetTranscript",
            "UploadStatus",
            "FinishUpload",
            "DeleteSession",
            "QueryResult",
        )
    }
    | {
        name: {
            "name": name,
            "contentType": "application/octet-stream",
            "payload": {"type": "string", "format": "binary"},
        }
        for name in ("AudioChunk", "UploadPart")
    }
    | {
        "StreamControl": {
            "name": "StreamControl",
            "contentType": "application/json",
            "payload": {
                "oneOf": [
                    {
                        "type": "object",
                        "properties": {"type": {"enum": ["end", "flush"]}},
                        "required": ["type"],
                    },
                    {"$ref": "schemas/PromptChange.schema.json"},
                ]
            },
        },
    }
)


def schemas() -> dict[str, dict[str, Any]]:
    """JSON Schema per model, by file name."""
    out = {}
    for name, model in {**MESSAGES, **HTTP_BODIES}.items():
        schema = model.model_json_schema(mode="serialization")
        schema["$id"] = f"https://voxwire.dev/schemas/v{CONTRACT_VERSION}/{name}.json"
        out[f"{name}.schema.json"] = schema
    return out


def asyncapi() -> dict[str, Any]:
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    for kind, names in _TOPIC_MESSAGES.items():
        channel = f"session{kind.value.title()}"
        channels[channel] = {
            "address": f"transcription/{{sid}}/{kind.value}",
            "description": _TOPIC_DOCS[kind] + " QoS 1, retained, MQTT 5 message expiry.",
            "parameters": {"sid": {"description": "session id: 1-64 of [A-Za-z0-9_-]"}},
            "messages": {n: {"$ref": f"#/components/messages/{n}"} for n in names},
            "bindings": {"mqtt": {"qos": 1, "retain": True}},
        }
        operations[f"receive{kind.value.title()}"] = {
            "action": "receive",
            "channel": {"$ref": f"#/channels/{channel}"},
            "summary": f"Subscribe to transcription/<sid>/{kind.value} (or transcription/<sid>/+).",
        }
    channels.update(_AUDIO_CHANNELS)
    operations.update(_AUDIO_OPERATIONS)
    messages: dict[str, Any] = {
        name: {
            "name": name,
            "contentType": "application/json",
            "payload": {"$ref": f"#/components/schemas/{name}"},
        }
        for name in MESSAGES
    }
    messages.update(_AUDIO_MESSAGES)
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "voxwire",
            "version": f"{CONTRACT_VERSION}.0.0",
            "description": (
                "Speech to text over MQTT. Every payload is versioned JSON with v, sid, a "
                "per-session strictly increasing seq, ts and type. A redelivery carries the same "
                "seq: drop duplicates by seq; on a gap fetch GET /v1/sessions/{sid}/messages"
                "?after=<last seq> from the gateway. Retained messages hold only the last message "
                "of each topic."
            ),
        },
        "defaultContentType": "application/json",
        "channels": channels,
        "operations": operations,
        "components": {"messages": messages, "schemas": _component_schemas()},
    }


def _component_schemas() -> dict[str, Any]:
    """Message schemas with their nested definitions hoisted beside them."""
    out: dict[str, Any] = {}
    for name, model in MESSAGES.items():
        schema = model.model_json_schema(
            mode="serialization", ref_template="#/components/schemas/{model}"
        )
        out.update(schema.pop("$defs", {}))
        out[name] = schema
    return out


def render() -> dict[str, str]:
    """Every contract file, by relative path, as text."""
    files = {"asyncapi.json": _dump(asyncapi())}
    for name, schema in schemas().items():
        files[f"schemas/{name}"] = _dump(schema)
    return files


def write(out: Path) -> list[Path]:
    written = []
    for rel, text in render().items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"
