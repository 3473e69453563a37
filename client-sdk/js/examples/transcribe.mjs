#!/usr/bin/env node
// Upload an audio file and print the session's messages as they come, one JSON
// object per line, then the transcript. The same SDK as in the browser.
//
//   node examples/transcribe.mjs FILE [--prompt PHRASE]... [--url URL]
//   (VOXWIRE_URL and VOXWIRE_API_KEY give the gateway and the key)

import { openAsBlob } from "node:fs";
import { basename } from "node:path";
import { parseArgs } from "node:util";

import { VoxwireClient } from "../src/index.js";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: "string", default: process.env.VOXWIRE_URL ?? "http://127.0.0.1:8000" },
    prompt: { type: "string", multiple: true, default: [] },
    protocol: { type: "string", default: "5" },
  },
});
if (positionals.length !== 1 || !process.env.VOXWIRE_API_KEY) {
  console.error("usage: VOXWIRE_API_KEY=... node examples/transcribe.mjs FILE [--prompt PHRASE]... [--url URL]");
  process.exit(2);
}

const client = new VoxwireClient({
  url: values.url,
  apiKey: process.env.VOXWIRE_API_KEY,
  protocolVersion: values.protocol === "4" ? 4 : 5,
});
const [path] = positionals;
try {
  const { feed } = await client.transcribe(await openAsBlob(path), {
    filename: basename(path),
    prompts: values.prompt,
    listeners: { message: (message) => console.log(JSON.stringify(message)) },
  });
  console.log(JSON.stringify({ protocol: feed.protocolVersion }));
  const transcript = await feed.done;
  console.log(JSON.stringify({ done: transcript }));
  process.exit(transcript.status === "completed" ? 0 : 1);
} catch (error) {
  console.error(`error: ${error}`);
  process.exit(1);
}
