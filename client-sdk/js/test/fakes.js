// Test doubles for the two interfaces the SDK talks through: mqtt.js's client
// and the gateway's history API. The code under test is the real SDK.

import { EventEmitter } from "node:events";

/** An mqtt.js client whose broker is the test: it decides CONNACK, SUBACK and deliveries. */
export class FakeMqttClient extends EventEmitter {
  constructor(url, options, broker) {
    super();
    this.url = url;
    this.options = options;
    this.broker = broker;
    this.subscriptions = [];
    this.published = [];
    this.refused = []; // publish callbacks held back: the test fails them as mqtt.js would
    this.ended = false;
    this.destroyed = 0;
    this.stream = { destroy: () => (this.destroyed += 1) }; // the WebSocket
  }

  subscribe(filter, options, callback) {
    this.subscriptions.push({ filter, options });
    const code = this.broker.subackCode;
    queueMicrotask(() => {
      // as mqtt.js 5 does: an ErrorWithSubackPacket that carries the SUBACK
      if (code >= 0x80) callback(Object.assign(new Error("Subscribe error: Unspecified error"), { packet: { granted: [code] } }));
      else callback(null, [{ topic: filter, qos: code }]);
    });
  }

  publish(topic, payload, options, callback) {
    this.published.push({ topic, payload, options });
    this.refused.push(callback);
  }

  /** The connection drops while mqtt.js replays its store: it refuses what it queued meanwhile. */
  dropDuringReplay(count) {
    for (const callback of this.refused.splice(-count)) callback?.(new Error("Connection closed"));
  }

  end(force, options, callback) {
    this.ended = true;
    this.disconnect = options ?? null;
    if (typeof callback === "function") queueMicrotask(callback);
  }

  /** The broker sends a message. */
  deliver(topic, message) {
    this.emit("message", topic, new TextEncoder().encode(JSON.stringify(message)));
  }
}

/** Stands in for mqtt.connect: records every client and answers CONNECT. */
export class FakeBroker {
  constructor({ refuseV5 = false, connackCode = 0, subackCode = 1 } = {}) {
    this.refuseV5 = refuseV5;
    this.connackCode = connackCode;
    this.subackCode = subackCode;
    this.clients = [];
    this.connect = (url, options) => {
      const client = new FakeMqttClient(url, options, this);
      this.clients.push(client);
      setTimeout(() => {
        if (options.protocolVersion === 5 && this.refuseV5) {
          client.emit("error", Object.assign(new Error("Connection refused: Unsupported Protocol Version"), { code: 132 }));
        } else if (this.connackCode) {
          client.emit("error", Object.assign(new Error("Connection refused: Not authorized"), { code: this.connackCode }));
        } else {
          client.emit("connect", { sessionPresent: false });
        }
      }, 1);
      return client;
    };
  }

  get last() {
    return this.clients.at(-1);
  }
}

/** The gateway's history: every message of a session, by seq. */
export class FakeHistory {
  constructor(messages = []) {
    this.messages = messages;
    this.calls = [];
  }

  async history(sid, after) {
    this.calls.push(after);
    const messages = this.messages.filter((m) => m.sid === sid && m.seq > after);
    return { sid, messages, last_seq: this.messages.at(-1)?.seq ?? 0 };
  }
}

export const SID = "s_test01";

/** The messages of one short transcription, seq 1..n. */
export function transcription(sid = SID) {
  const envelope = (seq) => ({ v: 1, sid, seq, ts: "2026-01-01T00:00:00Z" });
  const segment = (index, text) => ({ id: `${sid}-${index}`, index, start_ms: index * 2000, end_ms: index * 2000 + 1800, text });
  return [
    { ...envelope(1), type: "progress", status: "transcribing", percent: 10, processed_ms: 0, duration_ms: 4000 },
    { ...envelope(2), type: "partial", segment: segment(0, "and so my") },
    { ...envelope(3), type: "final", segment: segment(0, "And so my fellow Americans") },
    { ...envelope(4), type: "match", prompt_id: "p1", prompt: "fellow americans", score: 1, start_ms: 0, end_ms: 1800,
      text: "And so my fellow Americans", highlight: "And so my <em>fellow</em> <em>Americans</em>", segment_ids: [`${sid}-0`] },
    { ...envelope(5), type: "final", segment: segment(1, "ask not") },
    { ...envelope(6), type: "transcript", text: "And so my fellow Americans ask not", duration_ms: 4000,
      segments: [segment(0, "And so my fellow Americans"), segment(1, "ask not")] },
    { ...envelope(7), type: "progress", status: "completed", percent: 100, processed_ms: 4000, duration_ms: 4000 },
  ];
}

export const topicOf = (message) =>
  `transcription/${message.sid}/${{ progress: "progress", error: "progress", match: "match" }[message.type] ?? "result"}`;
