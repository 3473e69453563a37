import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Gateway, VoxwireApiError, VoxwireClient } from "../src/index.js";
import { FakeBroker } from "./fakes.js";

/** A fetch that answers from a list of [status, body, headers] and records the requests. */
function scripted(...answers) {
  const requests = [];
  const fetch = async (url, init) => {
    requests.push({ url: String(url), ...init });
    const [status, body, headers = {}] = answers.shift() ?? [500, {}];
    return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
  };
  return { fetch, requests };
}

const token = (sids, expiresIn = 3600) => ({
  token: "eyJhbGciOiJIUzI1NiJ9.e30.sig",
  username: "tok-9-abc",
  sids,
  expires_at: Math.floor(Date.now() / 1000) + expiresIn,
  ws_url: "ws://127.0.0.1:1/mqtt",
});

describe("Gateway", () => {
  it("sends the credential as a bearer token and waits out a 429", async () => {
    const { fetch, requests } = scripted([429, { code: "rate_limited" }, { "retry-after": "0.1" }], [200, []]);
    const gateway = new Gateway({ url: "http://gw/", credential: "vxk_a_b", fetch });
    assert.deepEqual(await gateway.listSessions(5), []);
    assert.equal(requests.length, 2);
    assert.equal(requests[0].url, "http://gw/v1/sessions?limit=5");
    assert.equal(requests[0].headers.authorization, "Bearer vxk_a_b");
  });

  it("turns an error answer into a VoxwireApiError with the server's hint", async () => {
    const body = { code: "audio_too_long", message: "the audio is 3 h long", hint: "split it" };
    const { fetch } = scripted([413, body]);
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    await assert.rejects(gateway.session("s_1"), (error) => {
      assert.ok(error instanceof VoxwireApiError);
      assert.deepEqual([error.status, error.code, error.message, error.hint], [413, ...Object.values(body)]);
      return true;
    });
  });

  it("asks for a session's next transcript version, and reads an earlier one", async () => {
    const accepted = { sid: "s_1", version: 2, model: "tiny.en", first_seq: 9 };
    const { fetch, requests } = scripted([202, accepted], [200, { sid: "s_1", version: 1 }]);
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    assert.deepEqual(await gateway.retranscribe("s_1", { vocabulary: ["ComfyUI"] }), accepted);
    assert.equal(requests[0].method, "POST");
    assert.equal(requests[0].url, "http://gw/v1/sessions/s_1/retranscribe");
    assert.deepEqual(JSON.parse(requests[0].body), { vocabulary: ["ComfyUI"] });
    assert.equal((await gateway.transcript("s_1", { version: 1 })).version, 1);
    assert.equal(requests[1].url, "http://gw/v1/sessions/s_1/transcript?version=1");
  });

  it("deletes a session, and reports a session that is not the caller's", async () => {
    const requests = [];
    const answers = [new Response(null, { status: 204 }), Response.json({ code: "not_found", message: "no session s_2" }, { status: 404 })];
    const fetch = async (url, init) => (requests.push({ url: String(url), ...init }), answers.shift());
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    assert.equal(await gateway.deleteSession("s_1"), undefined);
    assert.deepEqual([requests[0].method, requests[0].url], ["DELETE", "http://gw/v1/sessions/s_1"]);
    await assert.rejects(gateway.deleteSession("s_2"), (error) => error instanceof VoxwireApiError && error.status === 404);
  });

  it("says what to do when the gateway cannot be reached", async () => {
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch: async () => { throw new TypeError("fetch failed"); } });
    await assert.rejects(gateway.session("s_1"), { code: "unreachable", hint: /make run/ });
  });

  it("uploads the file with prompt specs and the redaction mode as a form", async () => {
    const { fetch, requests } = scripted([201, { sid: "s_1" }]);
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    await gateway.upload(new Blob([new Uint8Array(4)]), { prompts: ["fellow americans", { id: "x", text: "ask not" }], redact: "mask", filename: "a.wav" });
    const form = requests[0].body;
    assert.equal(form.get("file").name, "a.wav");
    assert.deepEqual(JSON.parse(form.get("prompts")), [{ id: "p1", text: "fellow americans" }, { id: "x", text: "ask not" }]);
    assert.equal(form.get("redact"), "mask");
    assert.equal(form.get("vocabulary"), null);
  });

  it("sends the vocabulary of an upload as a JSON list", async () => {
    const { fetch, requests } = scripted([201, { sid: "s_1" }]);
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    await gateway.upload(new Blob([new Uint8Array(4)]), { vocabulary: ["ComfyUI", "Kubernetes"] });
    assert.deepEqual(JSON.parse(requests[0].body.get("vocabulary")), ["ComfyUI", "Kubernetes"]);
  });

  it("asks for a translation only when told to", async () => {
    const { fetch, requests } = scripted([201, { sid: "s_1" }], [201, { sid: "s_2" }], [201, { sid: "s_3" }]);
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    await gateway.upload(new Blob([new Uint8Array(4)]), { language: "auto", task: "translate" });
    await gateway.upload(new Blob([new Uint8Array(4)]));
    await gateway.startStream({ language: "de", task: "translate" });
    assert.equal(requests[0].body.get("task"), "translate");
    assert.equal(requests[0].body.get("language"), "auto");
    assert.equal(requests[1].body.get("task"), null);
    assert.equal(JSON.parse(requests[2].body).task, "translate");
  });

  it("fetches the transcript as subtitles in the format asked for", async () => {
    const requests = [];
    const vtt = "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n<v S1>Hello\n";
    const fetch = async (url) => {
      requests.push(String(url));
      return new Response(vtt, { status: 200, headers: { "content-type": "text/vtt; charset=utf-8" } });
    };
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    assert.equal(await gateway.transcriptAs("s_1", "vtt"), vtt);
    assert.deepEqual(requests, ["http://gw/v1/sessions/s_1/transcript?format=vtt"]);
  });

  it("refuses an unsafe session id before any request", async () => {
    const { fetch, requests } = scripted();
    const gateway = new Gateway({ url: "http://gw", credential: "k", fetch });
    assert.throws(() => gateway.history("../keys", 0), { code: "invalid_session_id" });
    assert.equal(requests.length, 0);
  });
});

describe("VoxwireClient", () => {
  it("needs an API key or a token", () => {
    assert.throws(() => new VoxwireClient({ url: "http://gw" }), { code: "configuration" });
  });

  it("with an API key, gets a token for the session and connects with it to the URL the gateway names", async () => {
    const { fetch, requests } = scripted([201, token(["s_1"])], [200, { sid: "s_1", messages: [], last_seq: 0 }]);
    const broker = new FakeBroker();
    const client = new VoxwireClient({ url: "http://gw", apiKey: "vxk_a_b", fetch, connect: broker.connect });
    const feed = await client.follow("s_1");
    assert.equal(requests[0].url, "http://gw/v1/tokens");
    assert.deepEqual(JSON.parse(requests[0].body), { sids: ["s_1"], ttl_s: 3600 });
    assert.equal(broker.last.url, "ws://127.0.0.1:1/mqtt");
    assert.equal(broker.last.options.password, token([]).token);
    feed.close();
  });

  it("with a token only, follows the sessions it names and refuses others without asking anyone", async () => {
    const { fetch, requests } = scripted([200, { sid: "s_1", messages: [], last_seq: 0 }]);
    const broker = new FakeBroker();
    const client = new VoxwireClient({ url: "http://gw", token: token(["s_1"]), fetch, connect: broker.connect });
    await assert.rejects(client.follow("s_2"), { code: "forbidden" });
    assert.equal(broker.clients.length, 0);
    const feed = await client.follow("s_1");
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(requests[0].headers.authorization, `Bearer ${token([]).token}`, "history read with the token");
    feed.close();
  });

  it("passes listeners before connecting, so that the first messages are not missed", async () => {
    const first = { v: 1, sid: "s_1", seq: 1, ts: "", type: "progress", status: "queued", percent: 0, processed_ms: 0, duration_ms: 0 };
    const { fetch } = scripted([200, { sid: "s_1", messages: [first], last_seq: 1 }]);
    const broker = new FakeBroker();
    const client = new VoxwireClient({ url: "http://gw", token: token(["s_1"]), fetch, connect: broker.connect });
    const seen = [];
    const feed = await client.follow("s_1", { listeners: { progress: (m) => seen.push(m.status) } });
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.deepEqual(seen, ["queued"]);
    feed.close();
  });
});
