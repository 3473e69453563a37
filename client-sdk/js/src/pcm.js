/**
 * Microphone samples (float, any rate) to what the platform takes: PCM16LE,
 * 16 kHz, mono, in chunks of a fixed length. Pure code, streaming: feeding the
 * samples in pieces gives the same bytes as feeding them at once.
 * @module
 */

export const TARGET_RATE = 16_000;

/**
 * Resamples by averaging each output sample's span of input (a box filter
 * with fractional edges): a low-pass at the output's Nyquist rate for the usual
 * 44.1 and 48 kHz, and exact for 16 kHz input.
 */
export class Downsampler {
  /** @param {number} inputRate @param {number} [outputRate] */
  constructor(inputRate, outputRate = TARGET_RATE) {
    if (!(inputRate > 0 && outputRate > 0)) throw new RangeError(`bad sample rates ${inputRate} -> ${outputRate}`);
    this.ratio = inputRate / outputRate; // input samples per output sample
    this.sum = 0;
    this.filled = 0; // input samples (fractional) in the current output sample
  }

  /**
   * @param {Float32Array} input  samples in [-1, 1]
   * @returns {Float32Array} the output samples completed by this input
   */
  push(input) {
    const out = new Float32Array(Math.ceil((input.length + this.filled) / this.ratio) + 1);
    let n = 0;
    for (let i = 0; i < input.length; i++) {
      const x = input[i];
      let left = 1;
      while (left > 1e-9) {
        const take = Math.min(left, this.ratio - this.filled);
        this.sum += x * take;
        this.filled += take;
        left -= take;
        if (this.filled >= this.ratio - 1e-9) {
          out[n++] = this.sum / this.ratio;
          this.sum = 0;
          this.filled = 0;
        }
      }
    }
    return out.subarray(0, n);
  }
}

/**
 * Float samples to little-endian 16-bit PCM bytes (clipped to [-1, 1]).
 * @param {Float32Array} samples
 * @returns {Uint8Array}
 */
export function toPcm16le(samples) {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) {
    const x = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(i * 2, Math.round(x < 0 ? x * 0x8000 : x * 0x7fff), true);
  }
  return bytes;
}

/** Collects PCM16LE 16 kHz samples into chunks of `chunkMs`. */
export class PcmChunker {
  /** @param {number} inputRate @param {number} [chunkMs] */
  constructor(inputRate, chunkMs = 100) {
    this.downsampler = new Downsampler(inputRate);
    this.chunkSamples = Math.round((TARGET_RATE * chunkMs) / 1000);
    this.buffer = new Float32Array(this.chunkSamples);
    this.used = 0;
    this.sumSquares = 0;
  }

  /**
   * @param {Float32Array} input one block of microphone samples
   * @returns {{pcm: Uint8Array, level: number}[]} full chunks, with their RMS level
   */
  push(input) {
    const chunks = [];
    for (const x of this.downsampler.push(input)) {
      this.buffer[this.used++] = x;
      this.sumSquares += x * x;
      if (this.used === this.chunkSamples) chunks.push(this.#take());
    }
    return chunks;
  }

  /** What is left, as a shorter last chunk (null when nothing is). */
  flush() {
    return this.used ? this.#take() : null;
  }

  #take() {
    const chunk = { pcm: toPcm16le(this.buffer.subarray(0, this.used)), level: Math.sqrt(this.sumSquares / this.used) };
    this.used = 0;
    this.sumSquares = 0;
    return chunk;
  }
}
