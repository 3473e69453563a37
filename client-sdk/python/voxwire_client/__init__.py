"""voxwire client: the wire contract and a Python SDK for voxwire."""

from voxwire_client.errors import (
    ApiError,
    AuthenticationError,
    ClientError,
    ConfigurationError,
    ConnectionFailedError,
    InvalidSessionIdError,
    TranscriptionFailed,
)
from voxwire_client.messages import (
    ErrorMessage,
    MatchMessage,
    Message,
    ProgressMessage,
    SegmentData,
    SegmentMessage,
    SessionStatus,
    Task,
    TranscriptMessage,
    WordData,
    parse_message,
)
from voxwire_client.topics import TopicKind, parse_topic, session_filter, session_topic

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "AuthenticationError",
    "ClientError",
    "ConfigurationError",
    "ConnectionFailedError",
    "ErrorMessage",
    "InvalidSessionIdError",
    "MatchMessage",
    "Message",
    "ProgressMessage",
    "SegmentData",
    "SegmentMessage",
    "SessionStatus",
    "Task",
    "TopicKind",
    "TranscriptMessage",
    "TranscriptionFailed",
    "WordData",
    "parse_message",
    "parse_topic",
    "session_filter",
    "session_topic",
]

from voxwire_client.api import (
    AudioCodec,
    AudioEncoding,
    PromptChange,
    PromptSpec,
    RedactMode,
    SearchHit,
    SearchPage,
    SearchQuery,
    StreamControl,
    StreamRequest,
    TokenRequest,
    TokenResponse,
    TranscriptFormat,
)
from voxwire_client.client import AsyncClient, Transcript, pcm_chunks
from voxwire_client.options import Endpointing, EndpointingPolicy, SessionOptions
from voxwire_client.sync import Client

__all__ += [
    "AsyncClient",
    "AudioCodec",
    "AudioEncoding",
    "Client",
    "Endpointing",
    "EndpointingPolicy",
    "PromptChange",
    "PromptSpec",
    "RedactMode",
    "SearchHit",
    "SearchPage",
    "SearchQuery",
    "SessionOptions",
    "StreamControl",
    "StreamRequest",
    "TokenRequest",
    "TokenResponse",
    "Transcript",
    "TranscriptFormat",
    "pcm_chunks",
]
