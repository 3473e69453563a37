/**
 * Put a session's messages in `seq` order, drop duplicates, notice gaps.
 * Pure code: the SDK feeds it what MQTT and the history API deliver.
 * @module
 */

/** @template {{seq: number}} M */
export class Sequencer {
  /** @param {number} [lastSeq] the last seq already seen */
  constructor(lastSeq = 0) {
    this.lastSeq = lastSeq;
    /** @type {Map<number, M>} */
    this.pending = new Map();
  }

  /**
   * Take one message; return those now ready, in order (maybe none).
   * @param {M} message
   * @returns {M[]}
   */
  offer(message) {
    if (message.seq <= this.lastSeq || this.pending.has(message.seq)) return [];
    this.pending.set(message.seq, message);
    const ready = [];
    while (this.pending.has(this.lastSeq + 1)) {
      this.lastSeq += 1;
      ready.push(/** @type {M} */ (this.pending.get(this.lastSeq)));
      this.pending.delete(this.lastSeq);
    }
    return ready;
  }

  /** True when a later message arrived before an earlier one. */
  get hasGap() {
    return this.pending.size > 0;
  }
}
