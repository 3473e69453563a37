/**
 * The gateway's HTTP API: uploads, streams, tokens, history, transcripts, search.
 * @module
 */

import { VoxwireApiError, VoxwireError } from "./errors.js";
import { validateSid } from "./topics.js";

const RATE_LIMIT_RETRIES = 5;

/**
 * @typedef {object} PromptSpec
 * @property {string} id
 * @property {string} text
 * @property {boolean} [fuzzy]
 * @property {number} [slop]
 * @property {number | null} [within]
 * @property {string | null} [speaker]  only what this speaker (S1, S2...) says; needs diarization
 *
 * @typedef {object} Endpoints
 * @property {string} mqtt_url
 * @property {string} ws_url   where a browser connects (MQTT over WebSocket)
 * @property {string} topic_filter
 *
 * @typedef {object} SessionInfo
 * @property {string} sid
 * @property {"queued" | "transcribing" | "completed" | "failed"} status
 * @property {string} created_at
 * @property {string | null} [filename]
 * @property {number} duration_ms
 * @property {number} percent
 * @property {number} last_seq
 * @property {PromptSpec[]} prompts
 * @property {number} [version]  the latest transcript version asked for (2 and up: transcribed again)
 *
 * @typedef {SessionInfo & {endpoints: Endpoints}} SessionCreated
 * @typedef {SessionCreated & {audio_topic: string, control_topic: string}} StreamCreated
 *
 * @typedef {object} StreamRequest
 * @property {string} [language]  a code such as "de", or "auto" to detect it
 * @property {string} [model]  one of the models the platform serves (GET /healthz)
 * @property {PromptSpec[]} [prompts]
 * @property {"fast" | "balanced" | "patient" | {policy?: "fast" | "balanced" | "patient",
 *   min_silence_ms?: number, min_speech_ms?: number, partial_interval_s?: number,
 *   max_segment_s?: number, vad_threshold?: number}} [endpointing]  when a final is decided:
 *   "fast" sends a finished sentence's final 200 ms into the pause (a final marked `continues`
 *   follows if the speaker goes on), "balanced" after min_silence_ms, "patient" after 1000 ms
 * @property {number} [min_silence_ms]
 * @property {number} [partial_interval_s]
 * @property {"off" | "mask" | "entity" | "numbers"} [redact]
 * @property {boolean} [keep_original_audio]  with redaction: keep the audio as recorded too, for the owner
 * @property {"pcm16" | "opus" | "mulaw" | "alaw"} [encoding]  how chunks hold the audio: PCM16LE
 *   (16 kHz unless sample_rate says otherwise), one Opus packet each, or G.711 (8 kHz unless
 *   sample_rate says otherwise)
 * @property {"pcm16" | "opus" | "mulaw" | "alaw"} [codec]  the earlier name of encoding
 * @property {number} [sample_rate]  pcm16: 8000, 16000 or 48000; mulaw/alaw: 8000 or 16000;
 *   opus: the encoder's (8000-48000)
 * @property {number} [frame_ms]  with opus: each packet's duration (10, 20, 40, 60, 80, 100 or
 *   120); with pcm16 and G.711: the chunks' usual length (10-1000)
 * @property {boolean} [diarize]  label each final with its speaker (S1, S2...); never relabelled
 * @property {number} [max_speakers]  with diarize: at most this many speakers (1-20)
 * @property {string[]} [vocabulary]  words to expect, written as given (at most 50)
 * @property {"transcribe" | "translate"} [task]  translate: the finals in English (a multilingual model)
 *
 * @typedef {object} Health  what the platform is and serves (GET /healthz)
 * @property {string} status
 * @property {string} version
 * @property {string} mode  "embedded" or "distributed"
 * @property {string} model  the default model
 * @property {string[]} models  the models a session may ask for (the first is the default)
 * @property {Object<string, string>} [routes]  language -> the model of a session that names none ("*": the others)
 * @property {string | null} [device]  where the answering process's engines run
 *
 * @typedef {object} TokenResponse  a session token for the broker (and the session routes)
 * @property {string} token     the MQTT password
 * @property {string} username  the MQTT username
 * @property {string[]} sids
 * @property {number} expires_at  seconds since the epoch
 * @property {string} ws_url    the broker's MQTT-over-WebSocket URL
 *
 * @typedef {object} SearchHit
 * @property {string} sid
 * @property {string} segment_id
 * @property {number} index
 * @property {number} start_ms
 * @property {number} end_ms
 * @property {string} text
 * @property {string} highlight  HTML-escaped text with the answering words in <em>
 * @property {number} score
 * @property {string[]} segment_ids
 * @property {string | null} [speaker]  the segments' speaker (S1, S2...) where diarized and shared
 *
 * @typedef {object} SearchFilters
 * @property {boolean} [fuzzy]  also words a letter or two away
 * @property {string[]} [sids]  only these sessions
 * @property {number} [start_ms]  only segments ending after this point of the audio
 * @property {number} [end_ms]  only segments starting before this point of the audio
 * @property {string} [created_from]  sessions created from (ISO 8601)
 * @property {string} [created_to]  sessions created before (ISO 8601)
 * @property {string} [language]  sessions in this language
 * @property {string} [speaker]  only segments said by this speaker (S1, S2...: diarized sessions)
 * @property {number} [size]
 * @property {number} [offset]
 *
 * @typedef {{hits: SearchHit[], offset: number, size: number, more: boolean}} SearchPage
 * @typedef {{sid: string, messages: import("./messages.js").Message[], last_seq: number}} MessagesPage
 */

export class Gateway {
  /**
   * @param {object} options
   * @param {string} options.url  the gateway's base URL
   * @param {string} options.credential  an API key or a session token
   * @param {typeof fetch} [options.fetch]
   */
  constructor({ url, credential, fetch: fetchImpl = globalThis.fetch.bind(globalThis) }) {
    this.url = url.replace(/\/+$/, "");
    this.credential = credential;
    this.fetch = fetchImpl;
  }

  /**
   * One request; a 429 (the tenant's rate limit) is waited out and sent again.
   * @param {string} method
   * @param {string} path
   * @param {{json?: unknown, body?: BodyInit, query?: Record<string, string | number>}} [options]
   * @returns {Promise<Response>}
   */
  async request(method, path, { json, body, query } = {}) {
    const url = new URL(this.url + path);
    for (const [name, value] of Object.entries(query ?? {})) url.searchParams.set(name, String(value));
    /** @type {Record<string, string>} */
    const headers = { authorization: `Bearer ${this.credential}` };
    if (json !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(json);
    }
    for (let retry = 0; ; retry++) {
      let response;
      try {
        response = await this.fetch(url, { method, headers, body });
      } catch (cause) {
        throw new VoxwireError("unreachable", `cannot reach the gateway at ${this.url}`, {
          hint: "is voxwire running? start it with `make run`",
          cause,
        });
      }
      if (response.status === 429 && retry < RATE_LIMIT_RETRIES) {
        const wait = Math.min(Math.max(Number(response.headers.get("retry-after") ?? 1) || 1, 0.1), 30);
        await new Promise((resolve) => setTimeout(resolve, wait * 1000));
        continue;
      }
      if (!response.ok) throw new VoxwireApiError(response.status, await errorBody(response));
      return response;
    }
  }

  /** @param {string} method @param {string} path @param {object} [options] */
  async json(method, path, options) {
    return (await this.request(method, path, options)).json();
  }

  /**
   * Upload an audio file (WAV, FLAC, MP3, OGG/Opus, M4A) and start transcribing it.
   * @param {Blob} file
   * `diarize` labels every segment with its speaker (S1, S2...), within
   * `minSpeakers`/`maxSpeakers` when given. `vocabulary`: words to expect (names,
   * product terms), written as given. `task: "translate"`: the text in English, from
   * any language a multilingual model knows (an English-only model refuses with a 400).
   * `keepOriginalAudio` (with redaction): keep the audio as recorded too, for the owner.
   * @param {{prompts?: (string | PromptSpec)[], redact?: "off" | "mask" | "entity" | "numbers",
   *   language?: string, model?: string, filename?: string, diarize?: boolean,
   *   minSpeakers?: number, maxSpeakers?: number, vocabulary?: string[],
   *   task?: "transcribe" | "translate", keepOriginalAudio?: boolean}} [options]
   * @returns {Promise<SessionCreated>}
   */
  upload(
    file,
    {
      prompts = [],
      redact,
      language,
      model,
      filename,
      diarize,
      minSpeakers,
      maxSpeakers,
      vocabulary = [],
      task,
      keepOriginalAudio,
    } = {},
  ) {
    const form = new FormData();
    const name = filename ?? (/** @type {File} */ (file).name || "audio");
    form.set("file", file, name);
    form.set("prompts", JSON.stringify(promptSpecs(prompts)));
    if (redact) form.set("redact", redact);
    if (language) form.set("language", language);
    if (model) form.set("model", model);
    if (diarize) form.set("diarize", "true");
    if (minSpeakers != null) form.set("min_speakers", String(minSpeakers));
    if (maxSpeakers != null) form.set("max_speakers", String(maxSpeakers));
    if (vocabulary.length) form.set("vocabulary", JSON.stringify(vocabulary));
    if (task) form.set("task", task);
    if (keepOriginalAudio) form.set("keep_original_audio", "true");
    return this.json("POST", "/v1/sessions", { body: form });
  }

  /** Open a live stream session. @param {StreamRequest} [request] @returns {Promise<StreamCreated>} */
  startStream(request = {}) {
    return this.json("POST", "/v1/streams", {
      json: { ...request, prompts: promptSpecs(request.prompts ?? []) },
    });
  }

  /** What the platform is and which models it serves. @returns {Promise<Health>} */
  health() {
    return this.json("GET", "/healthz");
  }

  /** @param {string[]} sids @param {number} [ttlS] @returns {Promise<TokenResponse>} */
  createToken(sids, ttlS = 3600) {
    return this.json("POST", "/v1/tokens", { json: { sids: sids.map(validateSid), ttl_s: ttlS } });
  }

  /** @param {string} sid @returns {Promise<SessionInfo>} */
  session(sid) {
    return this.json("GET", `/v1/sessions/${validateSid(sid)}`);
  }

  /**
   * Delete the session everywhere: its audio, transcripts, messages, search entries
   * and retained messages (a live stream is ended first). Deleting it again
   * succeeds; anything else about it answers 404 from now on. Needs an API key.
   * @param {string} sid
   * @returns {Promise<void>}
   */
  async deleteSession(sid) {
    await this.request("DELETE", `/v1/sessions/${validateSid(sid)}`);
  }

  /** @param {number} [limit] @returns {Promise<SessionInfo[]>} */
  listSessions(limit = 100) {
    return this.json("GET", "/v1/sessions", { query: { limit } });
  }

  /** Every stored message with seq > after. @param {string} sid @param {number} after @returns {Promise<MessagesPage>} */
  history(sid, after) {
    return this.json("GET", `/v1/sessions/${validateSid(sid)}/messages`, { query: { after } });
  }

  /**
   * The transcript (with `version` and the `versions` kept): the current one, or
   * an earlier version that a re-transcription replaced.
   * @param {string} sid
   * @param {{version?: number}} [options]
   */
  transcript(sid, { version } = {}) {
    const query = version === undefined ? undefined : { version };
    return this.json("GET", `/v1/sessions/${validateSid(sid)}/transcript`, { query });
  }

  /**
   * Transcribe a finished session's stored audio again, as its next version; its
   * messages carry that `version`, from `first_seq` on.
   * @param {string} sid
   * `task` "translate" makes the new version's text English (a multilingual model).
   * @param {{model?: string, language?: string, vocabulary?: string[], task?: "transcribe" | "translate"}} [options]
   * @returns {Promise<{sid: string, version: number, model: string, first_seq: number}>}
   */
  retranscribe(sid, options = {}) {
    return this.json("POST", `/v1/sessions/${validateSid(sid)}/retranscribe`, { json: options });
  }

  /**
   * The transcript as a file: plain text, SubRip or WebVTT subtitles (with
   * speaker labels where the segments have them).
   * @param {string} sid
   * @param {"txt" | "srt" | "vtt"} format
   * @returns {Promise<string>}
   */
  async transcriptAs(sid, format) {
    const path = `/v1/sessions/${validateSid(sid)}/transcript`;
    return (await this.request("GET", path, { query: { format } })).text();
  }

  /**
   * The session's audio: the upload as it came, else WAV; a redacted session's with the
   * redacted spans silenced. `original: true`: a redacted session's audio as recorded,
   * when it was kept (`keep_original_audio`), for an API key (a session token gets 403).
   * @param {string} sid
   * @param {{original?: boolean}} [options]
   * @returns {Promise<Blob>}
   */
  async audio(sid, { original = false } = {}) {
    const path = `/v1/sessions/${validateSid(sid)}/audio`;
    const query = original ? { original: "true" } : undefined;
    return (await this.request("GET", path, { query })).blob();
  }

  /**
   * Add or remove (by id) standing prompts of a live stream, from its next final.
   * @param {string} sid
   * @param {{add?: (string | PromptSpec)[], remove?: string[]}} change
   */
  changePrompts(sid, { add = [], remove = [] }) {
    return this.json("POST", `/v1/sessions/${validateSid(sid)}/prompts`, {
      json: { type: "prompts", add: promptSpecs(add, "live"), remove },
    });
  }

  /**
   * Segments of the caller's transcripts that answer `q`, best first.
   * @param {string} q
   * @param {SearchFilters} [filters]
   * @returns {Promise<SearchPage>}
   */
  search(q, filters = {}) {
    return this.json("POST", "/v1/search", { json: { q, ...filters } });
  }
}

/**
 * Phrases become prompt specs with ids p1, p2, ... (or `<prefix>1`, ...).
 * @param {(string | PromptSpec)[]} prompts
 * @param {string} [prefix]
 * @returns {PromptSpec[]}
 */
export function promptSpecs(prompts, prefix = "p") {
  return prompts.map((prompt, i) => (typeof prompt === "string" ? { id: `${prefix}${i + 1}`, text: prompt } : prompt));
}

/** @param {Response} response */
async function errorBody(response) {
  try {
    const body = await response.json();
    return body && typeof body === "object" ? body : {};
  } catch {
    return {};
  }
}
