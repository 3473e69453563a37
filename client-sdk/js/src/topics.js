/**
 * The MQTT topic contract, as the browser sees it.
 *
 * Server -> client (QoS 1, retained):
 *   transcription/<sid>/result     partial and final segments, then the transcript
 *   transcription/<sid>/progress   status, percent, VAD state and lag; errors
 *   transcription/<sid>/match      prompt matches
 * Client -> server (live audio):
 *   audio/<sid>/chunk/<n>          PCM16LE, 16 kHz, mono; n counts from 0
 *   audio/<sid>/control            {"type": "end"} ends the stream; {"type": "flush"}
 *                                  asks for the open utterance's final now
 *
 * A session id is 1-64 characters of [A-Za-z0-9_-].
 * @module
 */

import { VoxwireError } from "./errors.js";

const SID = /^[A-Za-z0-9_-]{1,64}$/;

/** @typedef {"result" | "progress" | "match"} TopicKind */
export const TOPIC_KINDS = Object.freeze(["result", "progress", "match"]);

/**
 * Return `sid` if it is safe in a topic and a URL path, else throw.
 * @param {string} sid
 * @returns {string}
 */
export function validateSid(sid) {
  if (typeof sid !== "string" || !SID.test(sid)) {
    throw new VoxwireError(
      "invalid_session_id",
      `invalid session id ${JSON.stringify(sid)}: use 1-64 characters of A-Z, a-z, 0-9, '_' or '-'`,
    );
  }
  return sid;
}

/** The filter that receives every message of one session. @param {string} sid */
export function sessionFilter(sid) {
  return `transcription/${validateSid(sid)}/+`;
}

/**
 * Parse `transcription/<sid>/<kind>`; null for anything else.
 * @param {string} topic
 * @returns {{sid: string, kind: TopicKind} | null}
 */
export function parseSessionTopic(topic) {
  const parts = topic.split("/");
  if (parts.length !== 3 || parts[0] !== "transcription" || !SID.test(parts[1])) return null;
  const kind = /** @type {TopicKind} */ (parts[2]);
  return TOPIC_KINDS.includes(kind) ? { sid: parts[1], kind } : null;
}

/** Chunk `n` of a live stream. @param {string} sid @param {number} n */
export function audioChunkTopic(sid, n) {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`chunk number ${n} is not an integer >= 0`);
  return `audio/${validateSid(sid)}/chunk/${n}`;
}

/** Where a stream's control records go (`{"type": "end"}`). @param {string} sid */
export function audioControlTopic(sid) {
  return `audio/${validateSid(sid)}/control`;
}
