import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { Downsampler, PcmChunker, toPcm16le } from "../src/index.js";

const sine = (rate, hz, seconds, amplitude = 0.5) =>
  Float32Array.from({ length: Math.round(rate * seconds) }, (_, i) => amplitude * Math.sin((2 * Math.PI * hz * i) / rate));

/** Zero crossings per second / 2 = the frequency of a clean tone. */
const frequency = (samples, rate) => {
  let crossings = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i - 1] < 0 !== samples[i] < 0) crossings++;
  return (crossings / 2) * (rate / samples.length);
};

const rms = (samples) => Math.sqrt(samples.reduce((sum, x) => sum + x * x, 0) / samples.length);

describe("Downsampler", () => {
  for (const rate of [48_000, 44_100, 16_000, 8_000]) {
    it(`turns ${rate} Hz into 16 kHz, keeping a 440 Hz tone's pitch and level`, () => {
      const out = new Downsampler(rate).push(sine(rate, 440, 1));
      assert.ok(Math.abs(out.length - 16_000) <= 1, `${out.length} samples`);
      assert.ok(Math.abs(frequency(out, 16_000) - 440) < 2, `${frequency(out, 16_000)} Hz`);
      assert.ok(Math.abs(rms(out) - 0.5 / Math.SQRT2) < 0.01, `rms ${rms(out)}`);
    });
  }

  it("removes most of a tone above 8 kHz (no loud alias)", () => {
    const out = new Downsampler(48_000).push(sine(48_000, 15_000, 1));
    assert.ok(rms(out) < 0.2 * (0.5 / Math.SQRT2), `alias rms ${rms(out)}`);
  });

  it("gives the same samples whether fed at once or in blocks of any size", () => {
    const input = sine(44_100, 300, 0.5);
    const whole = new Downsampler(44_100).push(input);
    const pieces = new Downsampler(44_100);
    const out = [];
    for (let start = 0, size = 1; start < input.length; start += size, size = (size * 7) % 301 || 1) {
      out.push(...pieces.push(input.subarray(start, start + size)));
    }
    assert.equal(out.length, whole.length);
    out.forEach((x, i) => assert.ok(Math.abs(x - whole[i]) < 1e-6, `sample ${i}`));
  });

  it("refuses a rate that is not positive", () => {
    assert.throws(() => new Downsampler(0), RangeError);
  });
});

describe("toPcm16le", () => {
  it("writes little-endian 16-bit samples, clipped to full scale", () => {
    const bytes = toPcm16le(Float32Array.from([0, 1, -1, 2, -2, 0.5]));
    const view = new DataView(bytes.buffer);
    const values = Array.from({ length: 6 }, (_, i) => view.getInt16(i * 2, true));
    assert.deepEqual(values, [0, 32767, -32768, 32767, -32768, 16384]);
    assert.equal(bytes[2], 0xff); // 32767 = 0x7fff: low byte first
    assert.equal(bytes[3], 0x7f);
  });
});

describe("PcmChunker", () => {
  it("makes 100 ms chunks of 3200 bytes from 128-sample blocks at 48 kHz, and a short last one", () => {
    const chunker = new PcmChunker(48_000, 100);
    const input = sine(48_000, 440, 1.05);
    const chunks = [];
    for (let start = 0; start < input.length; start += 128) chunks.push(...chunker.push(input.subarray(start, start + 128)));
    assert.equal(chunks.length, 10);
    assert.ok(chunks.every((c) => c.pcm.length === 3200));
    assert.ok(chunks.every((c) => Math.abs(c.level - 0.5 / Math.SQRT2) < 0.02));
    const last = chunker.flush();
    assert.ok(last && last.pcm.length > 0 && last.pcm.length < 3200);
    assert.equal(chunker.flush(), null);
  });
});
