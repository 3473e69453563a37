/**
 * voxwire for browsers (and Node.js): follow transcription sessions over MQTT
 * and stream microphone audio, on top of mqtt.js.
 *
 *   import { VoxwireClient } from "@voxwire/client";
 *   const client = new VoxwireClient({ url: "http://127.0.0.1:8000", apiKey });
 *   const { feed } = await client.transcribe(file, { prompts: ["fellow americans"] });
 *   feed.on("final", (m) => console.log(m.segment.text));
 *   feed.on("match", (m) => console.log("heard", m.prompt, "at", m.start_ms));
 *   const transcript = await feed.done;
 *
 * A page that must not hold an API key gets a session token from its own
 * backend (`POST /v1/tokens`) and passes `token` instead: it can then follow
 * (and stream audio to) only the sessions the token names.
 * @module
 */

import mqtt from "mqtt";

import { VoxwireError } from "./errors.js";
import { Gateway } from "./http.js";
import { MicrophoneStream } from "./microphone.js";
import { SessionFeed } from "./session.js";
import { validateSid } from "./topics.js";

export { Emitter } from "./emitter.js";
export { VoxwireApiError, VoxwireError } from "./errors.js";
export { Gateway, promptSpecs } from "./http.js";
export { isTerminal, parseMessage } from "./messages.js";
export { MicrophoneStream } from "./microphone.js";
export { Downsampler, PcmChunker, TARGET_RATE, toPcm16le } from "./pcm.js";
export { Sequencer } from "./sequencer.js";
export { SessionFeed } from "./session.js";
export { audioChunkTopic, audioControlTopic, parseSessionTopic, sessionFilter, validateSid } from "./topics.js";

/** @typedef {import("./http.js").TokenResponse} TokenResponse */
/** @typedef {import("./http.js").StreamRequest} StreamRequest */
/** @typedef {import("./http.js").PromptSpec} PromptSpec */
/** @typedef {import("./http.js").SearchFilters} SearchFilters */
/** @typedef {import("./http.js").SearchPage} SearchPage */
/** @typedef {import("./session.js").SessionEvents} SessionEvents */
/** @typedef {{[K in keyof SessionEvents]?: (value: SessionEvents[K]) => void}} Listeners */

export class VoxwireClient {
  /**
   * @param {object} options
   * @param {string} [options.url]       the gateway; default: the page's origin
   * @param {string} [options.apiKey]    an API key: the client mints a token per session
   * @param {TokenResponse} [options.token]  or a session token (from `POST /v1/tokens`)
   * @param {string} [options.brokerUrl]  default: the URL the gateway names
   * @param {5 | 4} [options.protocolVersion]  the MQTT version to try first (5)
   * @param {number} [options.idlePollMs]
   * @param {(url: string, options: object) => any} [options.connect]  default: mqtt.connect
   * @param {typeof fetch} [options.fetch]
   */
  constructor({ url, apiKey, token, brokerUrl, protocolVersion = 5, idlePollMs = 5000, connect, fetch } = {}) {
    const base = url ?? globalThis.location?.origin;
    if (!base) throw new VoxwireError("configuration", "no gateway URL", { hint: "pass {url: 'http://host:8000'}" });
    if (!apiKey && !token) {
      throw new VoxwireError("configuration", "no API key and no session token", {
        hint: "pass {apiKey} (create one with `voxwire keys create`) or a {token} from POST /v1/tokens",
      });
    }
    this.token = token ?? null;
    this.gateway = new Gateway({ url: base, credential: apiKey ?? /** @type {TokenResponse} */ (token).token, fetch });
    this.canMint = Boolean(apiKey);
    this.brokerUrl = brokerUrl ?? null;
    this.protocolVersion = protocolVersion;
    this.idlePollMs = idlePollMs;
    this.connect = connect ?? mqtt.connect;
  }

  /**
   * Follow a session: resolves once subscribed, with the feed to listen on.
   * `listeners` are attached before the feed connects, so that none of its
   * messages is missed (a handler added later sees only what comes later).
   * @param {string} sid
   * @param {{afterSeq?: number, listeners?: Listeners}} [options]
   * @returns {Promise<SessionFeed>}
   */
  async follow(sid, { afterSeq = 0, listeners = {} } = {}) {
    const grant = await this.#tokenFor(validateSid(sid));
    const feed = new SessionFeed({
      sid,
      gateway: this.gateway,
      brokerUrl: this.brokerUrl ?? grant.ws_url,
      credentials: grant,
      connect: this.connect,
      afterSeq,
      protocolVersion: this.protocolVersion,
      idlePollMs: this.idlePollMs,
    });
    for (const [type, handler] of Object.entries(listeners)) {
      feed.on(/** @type {keyof SessionEvents} */ (type), /** @type {any} */ (handler));
    }
    return feed.start();
  }

  /** @param {string} sid @returns {Promise<TokenResponse>} */
  async #tokenFor(sid) {
    if (this.token && this.token.sids.includes(sid) && this.token.expires_at * 1000 > Date.now() + 5000) {
      return this.token;
    }
    if (!this.canMint) {
      throw new VoxwireError("forbidden", `the session token does not name session ${sid}`, {
        hint: "ask the backend for a token that names it",
        sid,
      });
    }
    return this.gateway.createToken([sid]);
  }

  /**
   * Upload a file and follow its session.
   * @param {Blob} file
   * @param {Parameters<Gateway["upload"]>[1] & {listeners?: Listeners}} [options]
   */
  async transcribe(file, { listeners, ...options } = {}) {
    const created = await this.gateway.upload(file, options);
    return { created, feed: await this.follow(created.sid, { listeners }) };
  }

  /**
   * Start a live stream from the microphone (or `mediaStream`) and follow it.
   * Stop it with `await mic.stop()`; the feed then ends with the transcript.
   * @param {StreamRequest} [request]
   * @param {ConstructorParameters<typeof MicrophoneStream>[1] & {listeners?: Listeners}} [options]
   */
  async streamMicrophone(request = {}, { listeners, ...options } = {}) {
    const created = await this.gateway.startStream(request);
    const feed = await this.follow(created.sid, { listeners });
    const mic = new MicrophoneStream(feed, options);
    try {
      await mic.start();
    } catch (error) {
      feed.endStream();
      throw error;
    }
    return { created, feed, mic };
  }

  upload(/** @type {Parameters<Gateway["upload"]>} */ ...args) {
    return this.gateway.upload(...args);
  }

  search(/** @type {Parameters<Gateway["search"]>} */ ...args) {
    return this.gateway.search(...args);
  }

  transcript(/** @type {Parameters<Gateway["transcript"]>} */ ...args) {
    return this.gateway.transcript(...args);
  }

  retranscribe(/** @type {Parameters<Gateway["retranscribe"]>} */ ...args) {
    return this.gateway.retranscribe(...args);
  }

  transcriptAs(/** @type {Parameters<Gateway["transcriptAs"]>} */ ...args) {
    return this.gateway.transcriptAs(...args);
  }

  /** Delete a session everywhere (its owner's key): audio, transcripts, search, messages. */
  deleteSession(/** @type {string} */ sid) {
    return this.gateway.deleteSession(sid);
  }

  audio(/** @type {string} */ sid) {
    return this.gateway.audio(sid);
  }

  changePrompts(/** @type {Parameters<Gateway["changePrompts"]>} */ ...args) {
    return this.gateway.changePrompts(...args);
  }
}
