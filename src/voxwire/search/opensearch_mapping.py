"""The OpenSearch index of transcripts: its analysis, mapping and the scripted
upsert that writes segments and windows (see :mod:`voxwire.search.opensearch`).

``VERSION`` names the mapping; the index is ``<alias>-v<VERSION>``. Version 4
added ``segments.speaker`` and ``windows.speakers`` (keywords, for the
``speaker`` filter): :data:`ADDED` lists what a version-3 index is given in
place (adding fields to a mapping is allowed), so writes keep working before a
``voxwire search reindex`` fills them in for what it held.
"""

from __future__ import annotations

from typing import Any

VERSION = 4

TEXT_ANALYSIS: dict[str, Any] = {
    "filter": {
        "vx_english_possessive": {"type": "stemmer", "language": "possessive_english"},
        "vx_english_stop": {"type": "stop", "stopwords": "_english_"},
        "vx_english_stemmer": {"type": "stemmer", "language": "english"},
        "vx_porter": {"type": "stemmer", "language": "porter"},
    },
    "analyzer": {
        "vx_english": {
            "type": "custom",
            "tokenizer": "standard",
            "filter": [
                "vx_english_possessive",
                "lowercase",
                "asciifolding",
                "vx_english_stop",
                "vx_english_stemmer",
            ],
        },
        "vx_exact": {
            "type": "custom",
            "tokenizer": "standard",
            "filter": ["lowercase", "asciifolding"],
        },
        "vx_norm": {
            "type": "custom",
            "tokenizer": "whitespace",
            "filter": ["lowercase", "vx_porter"],
        },
    },
}

_TEXT_FIELD: dict[str, Any] = {
    "type": "text",
    "analyzer": "vx_english",
    "fields": {"exact": {"type": "text", "analyzer": "vx_exact"}},
}

MAPPINGS: dict[str, Any] = {
    "dynamic": "strict",
    "_meta": {"version": VERSION},
    "properties": {
        "sid": {"type": "keyword"},
        "tenant_id": {"type": "keyword"},
        "language": {"type": "keyword"},
        "created_at": {"type": "date"},
        "text": _TEXT_FIELD,
        "segments": {
            "type": "nested",
            "properties": {
                "segment_id": {"type": "keyword"},
                "index": {"type": "integer"},
                "start_ms": {"type": "long"},
                "end_ms": {"type": "long"},
                "text": _TEXT_FIELD,
                "norm": {"type": "text", "analyzer": "vx_norm"},
                "speaker": {"type": "keyword"},
            },
        },
        "windows": {
            "type": "nested",
            "properties": {
                "index": {"type": "integer"},
                "start_ms": {"type": "long"},
                "end_ms": {"type": "long"},
                "norm": {"type": "text", "analyzer": "vx_norm"},
                "speakers": {"type": "keyword"},
                "segments": {"type": "object", "enabled": False},
            },
        },
    },
}

# params.field: segments or windows; params.items: new ones; params.language:
# a language or null.
UPSERT_ITEMS = """
if (ctx._source[params.field] == null) { ctx._source[params.field] = new ArrayList(); }
List segs = ctx._source[params.field];
boolean changed = ctx.op == 'create';
for (def seg : params.items) {
  int found = -1;
  for (int i = 0; i < segs.size(); ++i) {
    if (segs[i].index == seg.index) { found = i; break; }
  }
  if (found < 0) { segs.add(seg); changed = true; }
  else if (!segs[found].equals(seg)) { segs[found] = seg; changed = true; }
}
if (params.language != null && params.language != ctx._source.language) {
  ctx._source.language = params.language; changed = true;
}
if (!changed) { ctx.op = 'noop'; return; }
segs.sort((a, b) -> Integer.compare((int) a.index, (int) b.index));
if (params.field == 'segments') {
  List texts = new ArrayList();
  for (def seg : segs) { texts.add(seg.text); }
  ctx._source.text = String.join(' ', texts);
}
"""


ADDED: dict[str, Any] = {
    "properties": {
        "segments": {"type": "nested", "properties": {"speaker": {"type": "keyword"}}},
        "windows": {"type": "nested", "properties": {"speakers": {"type": "keyword"}}},
    }
}
"""The fields a version-3 index lacks, put into its mapping when it is opened."""
