import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { Sequencer, audioChunkTopic, audioControlTopic, isTerminal, parseMessage, parseSessionTopic, sessionFilter, validateSid } from "../src/index.js";

describe("session ids and topics", () => {
  it("accepts what the platform makes and refuses what could escape a topic or a path", () => {
    for (const sid of ["s_0123abcd", "a", "A-b_c", "x".repeat(64)]) assert.equal(validateSid(sid), sid);
    for (const sid of ["", "x".repeat(65), "a/b", "a+b", "#", "a\u0000b", "../x", "a b", "é", 42, null]) {
      assert.throws(() => validateSid(sid), { code: "invalid_session_id" }, String(sid));
    }
  });

  it("names and parses the contract's topics", () => {
    assert.equal(sessionFilter("s_1"), "transcription/s_1/+");
    assert.equal(audioChunkTopic("s_1", 7), "audio/s_1/chunk/7");
    assert.equal(audioControlTopic("s_1"), "audio/s_1/control");
    assert.throws(() => audioChunkTopic("s_1", -1), RangeError);
    assert.deepEqual(parseSessionTopic("transcription/s_1/match"), { sid: "s_1", kind: "match" });
    for (const topic of ["transcription/s_1", "transcription/s_1/other", "audio/s_1/control", "transcription/a+b/result"]) {
      assert.equal(parseSessionTopic(topic), null, topic);
    }
  });
});

describe("messages", () => {
  it("parses every example of the published JSON Schemas' message types", () => {
    const schemas = new URL("../../contract/schemas/", import.meta.url);
    const names = ["SegmentMessage", "ProgressMessage", "MatchMessage", "TranscriptMessage", "ErrorMessage"];
    for (const name of names) {
      const schema = JSON.parse(readFileSync(new URL(`${name}.schema.json`, schemas), "utf8"));
      for (const field of ["sid", "seq"]) assert.ok(schema.required.includes(field), `${name} requires ${field}`);
      const type = schema.properties.type;
      const types = type.enum ?? [type.const];
      assert.ok(types.length && types.every(Boolean), `${name} names its type`);
      for (const t of types) {
        const message = { v: 1, sid: "s_1", seq: 3, ts: "2026-01-01T00:00:00Z", type: t };
        assert.equal(parseMessage(JSON.stringify(message), "s_1")?.type, t);
      }
    }
  });

  it("knows which message ends a session", () => {
    const base = { v: 1, sid: "s_1", seq: 1, ts: "" };
    assert.ok(isTerminal({ ...base, type: "progress", status: "completed" }));
    assert.ok(isTerminal({ ...base, type: "progress", status: "failed" }));
    assert.ok(!isTerminal({ ...base, type: "progress", status: "transcribing" }));
    assert.ok(isTerminal({ ...base, type: "error", fatal: true }));
    assert.ok(!isTerminal({ ...base, type: "error", fatal: false }));
    assert.ok(!isTerminal({ ...base, type: "transcript" }));
  });
});

describe("Sequencer", () => {
  it("releases in order, once, and reports a gap until it is filled", () => {
    const seq = new Sequencer();
    const m = (n) => ({ seq: n });
    assert.deepEqual(seq.offer(m(2)), []);
    assert.ok(seq.hasGap);
    assert.deepEqual(seq.offer(m(1)).map((x) => x.seq), [1, 2]);
    assert.ok(!seq.hasGap);
    assert.deepEqual(seq.offer(m(2)), []);
    assert.deepEqual(seq.offer(m(1)), []);
    assert.deepEqual(seq.offer(m(3)).map((x) => x.seq), [3]);
    assert.deepEqual(new Sequencer(5).offer(m(5)), []);
  });
});
