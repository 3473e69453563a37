/**
 * Follow one session over MQTT: every message exactly once, in `seq` order.
 *
 * A {@link SessionFeed} holds one MQTT connection (MQTT 5, or 3.1.1 where the
 * broker refuses 5) with a client id that stays the same across reconnects and
 * a persistent session, and subscribes to `transcription/<sid>/+` at QoS 1.
 * QoS 1 duplicates are dropped by `seq`; a gap (a later message before an
 * earlier one, or a retained message after a reconnect) is filled from the
 * gateway's history API. Without traffic for `idlePollMs`, the history API is
 * asked too, so that a message is never waited for longer than that.
 * @module
 */

import { Emitter } from "./emitter.js";
import { VoxwireError } from "./errors.js";
import { isTerminal, parseMessage } from "./messages.js";
import { Sequencer } from "./sequencer.js";
import { audioChunkTopic, audioControlTopic, sessionFilter, validateSid } from "./topics.js";

/** @typedef {import("./messages.js").Message} Message */
/** @typedef {import("./messages.js").SegmentMessage} SegmentMessage */
/** @typedef {import("./messages.js").MatchMessage} MatchMessage */
/** @typedef {import("./messages.js").TranscriptMessage} TranscriptMessage */
/** @typedef {import("./messages.js").ProgressMessage} ProgressMessage */
/** @typedef {import("./http.js").Gateway} Gateway */

/**
 * @typedef {object} SessionEvents
 * @property {Message} message          every message, in seq order
 * @property {SegmentMessage | TranscriptMessage} result  what the result topic carries
 * @property {SegmentMessage} partial   a revisable tail; replaced by the final of the same index
 * @property {SegmentMessage} final     committed, never revised
 * @property {TranscriptMessage} transcript  the whole transcript, at the end
 * @property {ProgressMessage} progress
 * @property {MatchMessage} match
 * @property {VoxwireError & {fatal?: boolean}} error  from the server (an error message) or the SDK
 * @property {"connecting" | "live" | "reconnecting" | "closed"} state
 * @property {Transcript} end           the session is over
 */

/**
 * @typedef {object} Transcript
 * @property {string} sid
 * @property {string} text
 * @property {import("./messages.js").Segment[]} segments
 * @property {MatchMessage[]} matches
 * @property {"completed" | "failed"} status
 */

/** @typedef {{token: string, username: string}} Credentials */

const REFUSED_PROTOCOL = new Set([1, 132]); // 3.1.1 "unacceptable protocol version", 5 "unsupported"
const REFUSED_AUTH = new Set([4, 5, 134, 135, 140]);
export const SESSION_EXPIRY_S = 3600;

/** @extends {Emitter<SessionEvents>} */
export class SessionFeed extends Emitter {
  /**
   * @param {object} options
   * @param {string} options.sid
   * @param {Gateway} options.gateway      fills gaps from history
   * @param {string} options.brokerUrl     ws:// or wss:// URL of the broker
   * @param {Credentials} options.credentials  MQTT username and password (a session token)
   * @param {(url: string, options: object) => any} options.connect  mqtt.js `connect`
   * @param {number} [options.afterSeq]    messages up to this seq were seen already
   * @param {5 | 4} [options.protocolVersion]  the first version to try
   * @param {number} [options.idlePollMs]
   */
  constructor({ sid, gateway, brokerUrl, credentials, connect, afterSeq = 0, protocolVersion = 5, idlePollMs = 5000 }) {
    super();
    this.sid = validateSid(sid);
    this.gateway = gateway;
    this.brokerUrl = brokerUrl;
    this.credentials = credentials;
    this.connectMqtt = connect;
    this.protocolVersion = protocolVersion;
    this.idlePollMs = idlePollMs;
    /** @type {Sequencer<Message>} */
    this.sequencer = new Sequencer(afterSeq);
    this.clientId = `vxb-${credentials.username}-${sid}`.slice(0, 64);
    /** @type {"connecting" | "live" | "reconnecting" | "closed"} */
    this.state = "connecting";
    this.ended = false;
    /** @type {any} */
    this.client = null;
    /** @type {Map<number, import("./messages.js").Segment>} */
    this.finals = new Map();
    /** @type {MatchMessage[]} */
    this.matches = [];
    /** @type {TranscriptMessage | undefined} */
    this.transcript = undefined;
    this.lastActivity = Date.now();
    /** @type {Promise<void> | null} */
    this.catching = null;
    this.catchAgain = false;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.poller = undefined;
    /** Resolves with the transcript when the session ends. @type {Promise<Transcript>} */
    this.done = this.once("end");
  }

  /**
   * The browser says the network is gone (a phone leaving Wi-Fi, a tunnel):
   * drop the socket now, as it will never carry anything again on a changed
   * network, instead of waiting for the keepalive to run out. mqtt.js then
   * keeps every QoS 1 publish (the audio) in its store, retries every
   * second, and on reconnect sends the stored chunks, in order, before any
   * new one.
   */
  #offline = () => {
    this.client?.stream?.destroy();
  };

  /**
   * Connect and subscribe; resolves once the broker granted the subscription.
   * Rejects (and closes) when the broker refuses the credentials or the topic.
   * @returns {Promise<this>}
   */
  async start() {
    try {
      await this.#open(this.protocolVersion);
    } catch (error) {
      if (!(error instanceof VoxwireError && error.code === "protocol" && this.protocolVersion === 5)) {
        this.close();
        throw error;
      }
      await this.#open(4).catch((again) => {
        this.close();
        throw again;
      });
    }
    this.poller = setInterval(() => {
      if (Date.now() - this.lastActivity >= this.idlePollMs) this.catchUp();
    }, Math.max(50, this.idlePollMs / 2));
    this.poller.unref?.(); // Node.js: the connection, not the poller, keeps a process alive
    globalThis.addEventListener?.("offline", this.#offline); // browsers only
    return this;
  }

  /** @param {5 | 4} version */
  #open(version) {
    const client = this.connectMqtt(this.brokerUrl, {
      protocolVersion: version,
      clientId: this.clientId,
      username: this.credentials.username,
      password: this.credentials.token,
      clean: false,
      ...(version === 5 ? { properties: { sessionExpiryInterval: SESSION_EXPIRY_S } } : {}),
      keepalive: 30,
      reconnectPeriod: 1000,
      connectTimeout: 10_000,
      resubscribe: false,
    });
    this.client = client;
    this.protocolVersion = version;
    return new Promise((resolve, reject) => {
      let first = true;
      client.on("connect", () => {
        this.#subscribe().then(
          () => {
            this.#setState("live");
            if (first) resolve(undefined);
            first = false;
            this.catchUp(); // retained messages and anything missed while away
          },
          (error) => {
            if (first) reject(error);
            else this.#fail(error);
            first = false;
          },
        );
      });
      client.on("reconnect", () => this.#setState("reconnecting"));
      client.on("message", (/** @type {string} */ topic, /** @type {Uint8Array} */ payload) =>
        this.#receive(topic, payload),
      );
      client.on("error", (/** @type {Error & {code?: number}} */ error) => {
        const failure = connectFailure(error, this.brokerUrl);
        if (failure === null) return; // a transient socket error: mqtt.js reconnects
        client.end(true);
        if (first) reject(failure);
        else this.#fail(failure);
        first = false;
      });
    });
  }

  #subscribe() {
    return new Promise((resolve, reject) => {
      this.client.subscribe(sessionFilter(this.sid), { qos: 1 }, (/** @type {any} */ error, /** @type {any[]} */ granted) => {
        // mqtt.js fails the callback with the SUBACK packet: reason codes 0x80 (3.1.1), 0x87 (5)
        const codes = error?.packet?.granted ?? (Array.isArray(granted) ? granted.map((g) => g.qos) : []);
        const refused = codes.some((/** @type {number} */ code) => code >= 0x80);
        if (refused) {
          reject(
            new VoxwireError("forbidden", `not allowed to follow session ${this.sid}`, {
              hint: "the token does not name this session: ask the gateway for one that does",
              sid: this.sid,
            }),
          );
        } else if (error) {
          reject(new VoxwireError("subscribe", `subscribing to session ${this.sid} failed: ${error.message ?? error}`, { sid: this.sid }));
        } else {
          resolve(undefined);
        }
      });
    });
  }

  /** @param {string} topic @param {Uint8Array} payload */
  #receive(topic, payload) {
    this.lastActivity = Date.now();
    if (!topic.startsWith(`transcription/${this.sid}/`)) return;
    const message = parseMessage(payload, this.sid);
    if (message === null) return;
    this.#release(this.sequencer.offer(message));
    if (this.sequencer.hasGap) this.catchUp();
  }

  /**
   * Fetch what is missing from the history API (one request at a time; a call
   * while one runs makes it run once more).
   * @returns {Promise<void>}
   */
  catchUp() {
    if (this.ended || this.state === "closed") return Promise.resolve();
    if (this.catching) {
      this.catchAgain = true;
      return this.catching;
    }
    this.lastActivity = Date.now();
    this.catching = (async () => {
      try {
        do {
          this.catchAgain = false;
          const page = await this.gateway.history(this.sid, this.sequencer.lastSeq);
          for (const message of page.messages) this.#release(this.sequencer.offer(message));
        } while (this.catchAgain && !this.ended);
      } catch (error) {
        const status = /** @type {any} */ (error).status;
        if (status === 401 || status === 403 || status === 404) this.#fail(/** @type {VoxwireError} */ (error));
        // otherwise: the next idle poll or message tries again
      } finally {
        this.catching = null;
      }
    })();
    return this.catching;
  }

  /** @param {Message[]} ready */
  #release(ready) {
    for (const message of ready) {
      if (this.ended) return;
      this.emit("message", message);
      switch (message.type) {
        case "partial":
        case "final":
          if (message.type === "final") this.finals.set(message.segment.index, message.segment);
          this.emit("result", message);
          this.emit(message.type, message);
          break;
        case "transcript":
          this.transcript = message;
          this.emit("result", message);
          this.emit("transcript", message);
          break;
        case "progress":
          this.emit("progress", message);
          break;
        case "match":
          this.matches.push(message);
          this.emit("match", message);
          break;
        case "error": {
          const error = Object.assign(
            new VoxwireError(message.code, message.message, { hint: message.hint ?? null, sid: this.sid }),
            { fatal: message.fatal !== false },
          );
          this.emit("error", error);
          break;
        }
      }
      if (isTerminal(message)) this.#end(message);
    }
  }

  /** @param {Message} last */
  #end(last) {
    this.ended = true;
    const failed = last.type === "error" || (last.type === "progress" && last.status === "failed");
    const segments = this.transcript?.segments ?? [...this.finals.keys()].sort((a, b) => a - b).map((i) => /** @type {any} */ (this.finals.get(i)));
    this.emit("end", {
      sid: this.sid,
      text: this.transcript?.text ?? segments.map((s) => s.text).join(" ").trim(),
      segments,
      matches: this.matches,
      status: failed ? "failed" : "completed",
    });
    this.close({ endSession: true });
  }

  /** @param {VoxwireError} error */
  #fail(error) {
    this.emit("error", Object.assign(error, { fatal: true }));
    this.close();
  }

  /** @param {"connecting" | "live" | "reconnecting" | "closed"} state */
  #setState(state) {
    if (this.state === state || this.state === "closed") return;
    this.state = state;
    this.emit("state", state);
  }

  /**
   * Publish chunk `n` of a live stream (PCM16LE, 16 kHz, mono) at QoS 1; mqtt.js
   * keeps it while the connection is down and sends it on reconnect.
   *
   * One case mqtt.js does not keep: a chunk published while it replays its
   * store after a reconnect waits in a queue that it empties, refusing each
   * chunk with "Connection closed", when the connection drops again (a phone
   * on a flapping network). Those refusals come in chunk order, right as the
   * connection closes: each chunk is published again, in that order, into the
   * store, behind the chunks still there and ahead of any new one, so the
   * platform still gets every chunk in turn.
   * @param {number} n
   * @param {Uint8Array} pcm
   */
  publishAudio(n, pcm) {
    this.#requireClient().publish(audioChunkTopic(this.sid, n), pcm, { qos: 1 }, (/** @type {Error | undefined} */ error) => {
      if (error?.message === "Connection closed" && this.state !== "closed") {
        queueMicrotask(() => this.state !== "closed" && this.publishAudio(n, pcm));
      }
    });
  }

  /** Tell the platform the stream is over: its last final and transcript follow. */
  endStream() {
    this.#requireClient().publish(audioControlTopic(this.sid), JSON.stringify({ type: "end" }), { qos: 1 });
  }

  /**
   * Ask for the open utterance's final now, without waiting for the pause that
   * ends it (push-to-talk released): it comes marked `flushed`, and the stream
   * goes on. Nothing comes when no speech is open.
   */
  flush() {
    this.#requireClient().publish(audioControlTopic(this.sid), JSON.stringify({ type: "flush" }), { qos: 1 });
  }

  #requireClient() {
    if (this.client === null || this.state === "closed") {
      throw new VoxwireError("closed", `the feed of session ${this.sid} is closed`);
    }
    return this.client;
  }

  /**
   * Drop the connection now (the session goes on on the platform). With
   * `endSession` (the session has ended: nothing more will come) the broker
   * forgets this client's MQTT session too, instead of keeping it for the
   * session expiry (an hour) or, on an MQTT 3.1.1 broker, for ever.
   * @param {{endSession?: boolean}} [options]
   */
  close({ endSession = false } = {}) {
    clearInterval(this.poller);
    globalThis.removeEventListener?.("offline", this.#offline);
    if (this.state === "closed") return;
    this.#setState("closed");
    const client = this.client;
    if (client === null) return;
    // end(false): QoS 1 publishes in flight (the end of a stream) reach the broker first
    if (!endSession) {
      client.end(false);
    } else if (this.protocolVersion === 5) {
      client.end(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
    } else {
      client.end(false, {}, () => this.#cleanConnect());
    }
  }

  /** MQTT 3.1.1: connecting with a clean session makes the broker drop the old one. */
  #cleanConnect() {
    const client = this.connectMqtt(this.brokerUrl, {
      protocolVersion: 4,
      clientId: this.clientId,
      username: this.credentials.username,
      password: this.credentials.token,
      clean: true,
      reconnectPeriod: 0,
      connectTimeout: 5_000,
    });
    client.on("connect", () => client.end(false));
    client.on("error", () => client.end(true)); // best effort: the broker only holds more
  }
}

/**
 * A refusal that no reconnect can mend, as a VoxwireError; null for a
 * transient error.
 * @param {Error & {code?: number | string}} error
 * @param {string} url
 */
function connectFailure(error, url) {
  const code = typeof error.code === "number" ? error.code : null;
  if (code !== null && REFUSED_PROTOCOL.has(code)) {
    return new VoxwireError("protocol", `the broker at ${url} refused this MQTT version (${error.message})`);
  }
  if (code !== null && REFUSED_AUTH.has(code)) {
    return new VoxwireError("unauthorized", `the broker at ${url} refused the credentials (${error.message})`, {
      hint: "the token may have expired: ask the gateway for a new one",
    });
  }
  if (code !== null) return new VoxwireError("refused", `the broker at ${url} refused the connection: ${error.message}`);
  return null;
}
