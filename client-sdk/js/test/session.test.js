import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { SessionFeed, VoxwireError } from "../src/index.js";
import { FakeBroker, FakeHistory, SID, topicOf, transcription } from "./fakes.js";

const credentials = { token: "eyJ.x.y", username: "tok-1-abc" };

function feedOn(broker, history, options = {}) {
  return new SessionFeed({
    sid: SID,
    gateway: history,
    brokerUrl: "ws://127.0.0.1:1/mqtt",
    credentials,
    connect: broker.connect,
    idlePollMs: 60_000,
    ...options,
  });
}

function record(feed) {
  const seen = { message: [], final: [], partial: [], match: [], progress: [], result: [], error: [] };
  for (const type of Object.keys(seen)) feed.on(type, (value) => seen[type].push(value));
  return seen;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 5));

describe("SessionFeed", () => {
  it("connects with MQTT 5, a stable client id and a persistent session, and subscribes at QoS 1", async () => {
    const broker = new FakeBroker();
    const feed = await feedOn(broker, new FakeHistory()).start();
    const { options, subscriptions } = broker.last;
    assert.equal(options.protocolVersion, 5);
    assert.equal(options.clean, false);
    assert.ok(options.properties.sessionExpiryInterval > 0);
    assert.equal(options.clientId, `vxb-${credentials.username}-${SID}`);
    assert.equal(options.username, credentials.username);
    assert.equal(options.password, credentials.token);
    assert.deepEqual(subscriptions, [{ filter: `transcription/${SID}/+`, options: { qos: 1 } }]);
    assert.equal(feed.state, "live");
    feed.close();
  });

  it("releases every message once, in seq order, despite QoS 1 redeliveries", async () => {
    const broker = new FakeBroker();
    const messages = transcription();
    const feed = await feedOn(broker, new FakeHistory(messages)).start();
    await settle(); // the catch-up after connect finds the whole history
    const seen = record(feed);
    assert.equal(feed.sequencer.lastSeq, 7);
    for (const m of messages) broker.last.deliver(topicOf(m), m); // all duplicates now
    assert.equal(seen.message.length, 0);
  });

  it("emits typed events and ends with the transcript", async () => {
    const broker = new FakeBroker();
    const messages = transcription();
    const feed = feedOn(broker, new FakeHistory());
    const seen = record(feed);
    await feed.start();
    for (const m of messages) {
      broker.last.deliver(topicOf(m), m);
      broker.last.deliver(topicOf(m), m); // each twice
    }
    const transcript = await feed.done;
    assert.deepEqual(seen.message.map((m) => m.seq), [1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(seen.final.map((m) => m.segment.text), ["And so my fellow Americans", "ask not"]);
    assert.deepEqual(seen.partial.map((m) => m.seq), [2]);
    assert.deepEqual(seen.result.map((m) => m.type), ["partial", "final", "final", "transcript"]);
    assert.equal(seen.match[0].prompt, "fellow americans");
    assert.equal(seen.progress.length, 2);
    assert.equal(transcript.status, "completed");
    assert.equal(transcript.text, "And so my fellow Americans ask not");
    assert.equal(transcript.matches.length, 1);
    assert.equal(feed.state, "closed");
    assert.ok(broker.last.ended);
    // the session is over: the broker is told to forget the MQTT session now
    assert.deepEqual(broker.last.disconnect, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } });
  });

  it("ends the MQTT session of a finished feed with a clean connect on MQTT 3.1.1", async () => {
    const broker = new FakeBroker({ refuseV5: true });
    const feed = await feedOn(broker, new FakeHistory()).start();
    const followed = broker.last;
    for (const m of transcription()) followed.deliver(topicOf(m), m);
    await feed.done;
    await settle();
    assert.equal(broker.clients.length, 3, "v5 refused, 3.1.1 followed, then one clean connect");
    assert.deepEqual(
      { clientId: broker.last.options.clientId, clean: broker.last.options.clean },
      { clientId: followed.options.clientId, clean: true },
    );
    assert.equal(followed.options.clean, false);
    await settle();
    assert.ok(broker.last.ended);
  });

  it("keeps the MQTT session of a feed closed before its end", async () => {
    const broker = new FakeBroker();
    const feed = await feedOn(broker, new FakeHistory()).start();
    feed.close();
    assert.equal(broker.clients.length, 1);
    assert.equal(broker.last.disconnect, null, "a plain DISCONNECT: the broker keeps the session");
  });

  it("fills a gap from the history API", async () => {
    const broker = new FakeBroker();
    const messages = transcription();
    const history = new FakeHistory([]);
    const feed = feedOn(broker, history);
    const seen = record(feed);
    await feed.start();
    await settle();
    history.messages = messages; // now stored: seq 2 was lost on the way
    broker.last.deliver(topicOf(messages[0]), messages[0]);
    broker.last.deliver(topicOf(messages[2]), messages[2]);
    await settle();
    assert.deepEqual(seen.message.map((m) => m.seq), [1, 2, 3, 4, 5, 6, 7]);
    assert.ok(history.calls.includes(1), `history asked after seq 1: ${history.calls}`);
  });

  it("catches up after a reconnect", async () => {
    const broker = new FakeBroker();
    const messages = transcription();
    const history = new FakeHistory(messages.slice(0, 2));
    const feed = feedOn(broker, history);
    const seen = record(feed);
    const states = [];
    feed.on("state", (s) => states.push(s));
    await feed.start();
    await settle();
    assert.deepEqual(seen.message.map((m) => m.seq), [1, 2]);
    broker.last.emit("reconnect");
    history.messages = messages.slice(0, 4); // what was published while away
    broker.last.emit("connect", { sessionPresent: true });
    await settle();
    assert.deepEqual(seen.message.map((m) => m.seq), [1, 2, 3, 4]);
    assert.deepEqual(states, ["live", "reconnecting", "live"]);
    assert.equal(broker.last.subscriptions.length, 2, "subscribed again after the reconnect");
    feed.close();
  });

  it("asks the history API when nothing arrives for idlePollMs", async () => {
    const broker = new FakeBroker();
    const history = new FakeHistory([]);
    const feed = await feedOn(broker, history, { idlePollMs: 60 }).start();
    await settle();
    const before = history.calls.length;
    history.messages = transcription().slice(0, 3);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.ok(history.calls.length > before);
    assert.equal(feed.sequencer.lastSeq, 3);
    feed.close();
  });

  it("falls back to MQTT 3.1.1 when the broker refuses MQTT 5", async () => {
    const broker = new FakeBroker({ refuseV5: true });
    const feed = await feedOn(broker, new FakeHistory()).start();
    assert.deepEqual(broker.clients.map((c) => c.options.protocolVersion), [5, 4]);
    assert.ok(broker.clients[0].ended);
    assert.equal(broker.last.options.properties, undefined);
    assert.equal(feed.state, "live");
    feed.close();
  });

  it("rejects with 'forbidden' when the broker refuses the subscription", async () => {
    for (const code of [0x80, 0x87]) {
      const broker = new FakeBroker({ subackCode: code });
      await assert.rejects(feedOn(broker, new FakeHistory()).start(), (error) => {
        assert.ok(error instanceof VoxwireError);
        assert.equal(error.code, "forbidden");
        assert.match(error.hint, /token/);
        return true;
      });
      assert.ok(broker.last.ended);
    }
  });

  it("rejects with 'unauthorized' when the broker refuses the credentials", async () => {
    const broker = new FakeBroker({ connackCode: 135 });
    await assert.rejects(feedOn(broker, new FakeHistory()).start(), { code: "unauthorized" });
    assert.equal(broker.clients.length, 1, "no second try with other credentials or version");
  });

  it("turns a fatal error message into a failed end", async () => {
    const broker = new FakeBroker();
    const feed = feedOn(broker, new FakeHistory());
    const seen = record(feed);
    await feed.start();
    const error = { v: 1, sid: SID, seq: 1, ts: "2026-01-01T00:00:00Z", type: "error", code: "bad_audio", message: "not audio", hint: "send WAV", fatal: true };
    broker.last.deliver(topicOf(error), error);
    const transcript = await feed.done;
    assert.equal(transcript.status, "failed");
    assert.equal(seen.error[0].code, "bad_audio");
    assert.equal(seen.error[0].hint, "send WAV");
    assert.equal(seen.error[0].fatal, true);
  });

  it("ignores payloads of other sessions, versions or shapes", async () => {
    const broker = new FakeBroker();
    const feed = feedOn(broker, new FakeHistory());
    const seen = record(feed);
    await feed.start();
    const [first] = transcription();
    broker.last.deliver(topicOf(first), { ...first, sid: "s_other" });
    broker.last.deliver(topicOf(first), { ...first, v: 2 });
    broker.last.emit("message", topicOf(first), new TextEncoder().encode("not json"));
    broker.last.deliver(topicOf(first), { ...first, seq: 0 });
    assert.equal(seen.message.length, 0);
    feed.close();
  });

  it("publishes audio chunks, a flush and the end of a stream at QoS 1", async () => {
    const broker = new FakeBroker();
    const feed = await feedOn(broker, new FakeHistory()).start();
    feed.publishAudio(0, new Uint8Array([1, 2]));
    feed.publishAudio(1, new Uint8Array([3, 4]));
    feed.flush();
    feed.endStream();
    const published = broker.last.published;
    assert.deepEqual(published.map((p) => p.topic), [`audio/${SID}/chunk/0`, `audio/${SID}/chunk/1`, `audio/${SID}/control`, `audio/${SID}/control`]);
    assert.ok(published.every((p) => p.options.qos === 1));
    assert.deepEqual(JSON.parse(published[2].payload), { type: "flush" });
    assert.deepEqual(JSON.parse(published[3].payload), { type: "end" });
    feed.close();
    assert.throws(() => feed.publishAudio(2, new Uint8Array(2)), { code: "closed" });
  });

  it("drops its socket when the browser reports the network gone, and stops listening once closed", async () => {
    const window = new EventTarget(); // what a browser page's global scope is
    Object.assign(globalThis, {
      addEventListener: window.addEventListener.bind(window),
      removeEventListener: window.removeEventListener.bind(window),
    });
    try {
      const broker = new FakeBroker();
      const feed = await feedOn(broker, new FakeHistory()).start();
      window.dispatchEvent(new Event("offline"));
      assert.equal(broker.last.destroyed, 1); // mqtt.js reconnects with its store of publishes
      feed.close();
      window.dispatchEvent(new Event("offline"));
      assert.equal(broker.last.destroyed, 1);
    } finally {
      delete (/** @type {any} */ (globalThis)).addEventListener;
      delete (/** @type {any} */ (globalThis)).removeEventListener;
    }
  });

  it("publishes again, in order, the chunks mqtt.js refuses when the connection drops during its replay", async () => {
    const broker = new FakeBroker();
    const feed = await feedOn(broker, new FakeHistory()).start();
    for (let n = 0; n < 5; n++) feed.publishAudio(n, new Uint8Array([n]));
    broker.last.dropDuringReplay(3); // chunks 2, 3, 4 were queued behind the replay
    await settle(); // before the microphone's next chunk
    feed.publishAudio(5, new Uint8Array([5]));
    const chunks = broker.last.published.map((p) => Number(p.topic.split("/").at(-1)));
    assert.deepEqual(chunks, [0, 1, 2, 3, 4, 2, 3, 4, 5]);
    feed.close();
    broker.last.dropDuringReplay(1); // refused after the end: nothing more to send
    await settle();
    assert.equal(broker.last.published.length, 9);
  });
});
