/**
 * AudioWorklet processor "voxwire-pcm": the microphone's first channel to
 * PCM16LE 16 kHz chunks, off the main thread. Each chunk is posted as
 * `{pcm: ArrayBuffer, level: number}`; a message `"flush"` posts what is left
 * and then `{done: true}`.
 * Options: `processorOptions: {chunkMs: 100}`.
 */

import { PcmChunker } from "./pcm.js";

class VoxwirePcmProcessor extends AudioWorkletProcessor {
  /** @param {{processorOptions?: {chunkMs?: number}}} options */
  constructor(options) {
    super();
    // `sampleRate` is the AudioContext's rate, a global of the worklet scope
    this.chunker = new PcmChunker(sampleRate, options.processorOptions?.chunkMs ?? 100);
    this.running = true;
    this.port.onmessage = (event) => {
      if (event.data !== "flush") return;
      const last = this.chunker.flush();
      if (last) this.port.postMessage({ pcm: last.pcm.buffer, level: last.level }, [last.pcm.buffer]);
      this.port.postMessage({ done: true });
      this.running = false;
    };
  }

  /** @param {Float32Array[][]} inputs */
  process(inputs) {
    const channel = inputs[0]?.[0];
    if (this.running && channel) {
      for (const { pcm, level } of this.chunker.push(channel)) {
        this.port.postMessage({ pcm: pcm.buffer, level }, [pcm.buffer]);
      }
    }
    return this.running;
  }
}

registerProcessor("voxwire-pcm", VoxwirePcmProcessor);
