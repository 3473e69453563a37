/**
 * The wire messages of the session topics (contract version 1). The JSON
 * Schemas in client-sdk/contract/ are the full definition; these typedefs name
 * what a browser app uses.
 *
 * Every message has `v` (1), `sid`, `seq` (per session, strictly increasing
 * across its topics; a redelivery carries the same seq), `ts` (server time,
 * ISO 8601), `type` and `version`: the transcript version it belongs to (1; a
 * re-transcription of the session's audio publishes 2, 3... with `seq` going on).
 * @module
 */

/**
 * A word of a final segment: times in ms from the audio start, inside its
 * segment's, and how sure the engine was of it (0 to 1).
 * @typedef {object} Word
 * @property {string} word
 * @property {number} start_ms
 * @property {number} end_ms
 * @property {number} probability
 */

/**
 * @typedef {object} Segment
 * @property {string} id
 * @property {number} index
 * @property {number} start_ms
 * @property {number} end_ms
 * @property {string} text
 * @property {string | null} [language]
 * @property {number | null} [language_prob] how sure the detection was (language "auto")
 * @property {string | null} [speaker] with diarization: S1, S2... in order of appearance; never changed later
 * @property {string | null} [model] the model that transcribed it
 * @property {"transcribe" | "translate"} [task] translate: the text is in English, `language` the one spoken
 * @property {Word[]} [words] word times and confidence, in order (finals only; empty where none)
 * @property {boolean} [continues] a live final that goes on with the utterance of the final
 *   before (that one was decided early, endpointing policy "fast"): show it on the same line
 * @property {boolean} [flushed] a live final the client asked for with `flush()` before a
 *   pause ended the utterance
 */

/**
 * @typedef {object} Envelope
 * @property {1} v
 * @property {string} sid
 * @property {number} seq
 * @property {string} ts
 * @property {number} [version] the transcript version (1 unless the session was transcribed again)
 */

/**
 * @typedef {Envelope & {type: "partial" | "final", segment: Segment,
 *   latency?: {vad_ms: number, queue_ms: number, transcribe_ms: number} | null}} SegmentMessage
 * @typedef {Envelope & {type: "transcript", text: string, language?: string | null,
 *   language_prob?: number | null, duration_ms: number, segments: Segment[],
 *   model?: string | null, task?: "transcribe" | "translate"}} TranscriptMessage
 * @typedef {Envelope & {type: "progress", status: "queued" | "transcribing" | "completed" | "failed",
 *   percent: number, processed_ms: number, duration_ms: number,
 *   speech?: boolean | null, lag_ms?: number | null,
 *   partials_skipped?: number | null}} ProgressMessage
 * @typedef {Envelope & {type: "match", prompt_id: string, prompt: string, score: number,
 *   start_ms: number, end_ms: number, text: string, highlight: string,
 *   segment_ids: string[], speaker?: string | null}} MatchMessage  speaker: who said the words (diarized)
 * @typedef {Envelope & {type: "error", code: string, message: string,
 *   hint?: string | null, fatal: boolean}} ErrorMessage
 * @typedef {SegmentMessage | TranscriptMessage | ProgressMessage | MatchMessage | ErrorMessage} Message
 */

const TYPES = new Set(["partial", "final", "transcript", "progress", "match", "error"]);

/**
 * Parse one payload of session `sid`; null when it is not a message of this
 * contract version (such a payload is ignored, as the Python SDK does).
 * @param {string | Uint8Array} payload
 * @param {string} sid
 * @returns {Message | null}
 */
export function parseMessage(payload, sid) {
  let value;
  try {
    value = JSON.parse(typeof payload === "string" ? payload : new TextDecoder().decode(payload));
  } catch {
    return null;
  }
  if (value === null || typeof value !== "object") return null;
  if (value.v !== 1 || value.sid !== sid || !Number.isInteger(value.seq) || value.seq < 1) return null;
  return TYPES.has(value.type) ? /** @type {Message} */ (value) : null;
}

/**
 * True for the last message a session publishes: a fatal error, or progress
 * that says completed or failed.
 * @param {Message} message
 */
export function isTerminal(message) {
  if (message.type === "error") return message.fatal !== false;
  return message.type === "progress" && (message.status === "completed" || message.status === "failed");
}
