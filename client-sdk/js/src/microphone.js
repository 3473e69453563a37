/**
 * Stream a microphone (any MediaStream with audio) to a live session:
 * AudioWorklet -> PCM16LE 16 kHz chunks -> `audio/<sid>/chunk/<n>` at QoS 1.
 * @module
 */

import { Emitter } from "./emitter.js";
import { VoxwireError } from "./errors.js";
import { TARGET_RATE } from "./pcm.js";

/**
 * @typedef {object} MicrophoneEvents
 * @property {number} level     RMS of each chunk sent, 0..1
 * @property {number} chunk     the number of the chunk just sent
 * @property {number} stopped   how many chunks were sent in all
 */

/** @extends {Emitter<MicrophoneEvents>} */
export class MicrophoneStream extends Emitter {
  /**
   * @param {import("./session.js").SessionFeed} feed  publishes the audio
   * @param {object} [options]
   * @param {MediaStream} [options.mediaStream]  default: getUserMedia({audio: true})
   * @param {AudioContext} [options.audioContext]  default: a new one
   * @param {number} [options.chunkMs]
   * @param {string | URL} [options.workletUrl]  where pcm-worklet.js is served
   */
  constructor(feed, { mediaStream, audioContext, chunkMs = 100, workletUrl } = {}) {
    super();
    this.feed = feed;
    this.mediaStream = mediaStream ?? null;
    this.context = audioContext ?? null;
    this.ownsContext = !audioContext;
    this.chunkMs = chunkMs;
    this.workletUrl = workletUrl ?? new URL("./pcm-worklet.js", import.meta.url);
    this.sent = 0;
    /** @type {AudioWorkletNode | null} */
    this.node = null;
    /** @type {MediaStreamAudioSourceNode | null} */
    this.source = null;
  }

  /** Ask for the microphone (unless given) and start sending. */
  async start() {
    if (!this.mediaStream) {
      if (!globalThis.navigator?.mediaDevices?.getUserMedia) {
        throw new VoxwireError("no_microphone", "this browser gives no microphone access", {
          hint: "open the page over https:// or on localhost",
        });
      }
      try {
        this.mediaStream = await navigator.mediaDevices.getUserMedia({
          audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true },
        });
      } catch (cause) {
        throw new VoxwireError("no_microphone", `the microphone is not available: ${/** @type {Error} */ (cause).message}`, {
          hint: "allow microphone access for this page",
          cause,
        });
      }
    }
    const context = (this.context ??= this.#newContext());
    await context.audioWorklet.addModule(this.workletUrl);
    this.source = context.createMediaStreamSource(this.mediaStream);
    this.node = new AudioWorkletNode(context, "voxwire-pcm", {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      channelCount: 1,
      channelCountMode: "explicit",
      processorOptions: { chunkMs: this.chunkMs },
    });
    this.finished = new Promise((resolve) => {
      /** @type {AudioWorkletNode} */ (this.node).port.onmessage = ({ data }) => {
        if (data.done) return resolve(undefined);
        const n = this.sent++;
        this.feed.publishAudio(n, new Uint8Array(data.pcm));
        this.emit("chunk", n);
        this.emit("level", data.level);
      };
    });
    this.source.connect(this.node);
    if (context.state === "suspended") await context.resume();
    return this;
  }

  /**
   * A context at 16 kHz where the browser can resample the microphone into it
   * (its resampler is better than the worklet's box filter); else the default.
   */
  #newContext() {
    const context = new AudioContext({ sampleRate: TARGET_RATE });
    try {
      context.createMediaStreamSource(/** @type {MediaStream} */ (this.mediaStream)).disconnect();
      return context;
    } catch {
      context.close(); // a browser that cannot connect streams of other rates
      return new AudioContext();
    }
  }

  /** Stop the microphone, send what is left and end the stream. */
  async stop() {
    if (!this.node) return;
    this.node.port.postMessage("flush");
    await this.finished;
    this.source?.disconnect();
    this.node = null;
    for (const track of this.mediaStream?.getTracks() ?? []) track.stop();
    if (this.ownsContext) await this.context?.close();
    this.feed.endStream();
    this.emit("stopped", this.sent);
  }
}
