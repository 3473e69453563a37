/**
 * A small typed event emitter: `on` returns a function that removes the handler.
 * A handler that throws does not stop the others (the error is rethrown later,
 * so it still reaches the console).
 * @module
 */

/** @template {Record<string, any>} Events */
export class Emitter {
  /** @type {Map<keyof Events, Set<(value: any) => void>>} */
  #handlers = new Map();

  /**
   * @template {keyof Events} K
   * @param {K} type
   * @param {(value: Events[K]) => void} handler
   * @returns {() => void} removes the handler
   */
  on(type, handler) {
    let set = this.#handlers.get(type);
    if (!set) this.#handlers.set(type, (set = new Set()));
    set.add(handler);
    return () => set.delete(handler);
  }

  /**
   * The next value of `type`, as a promise.
   * @template {keyof Events} K
   * @param {K} type
   * @returns {Promise<Events[K]>}
   */
  once(type) {
    return new Promise((resolve) => {
      const off = this.on(type, (value) => {
        off();
        resolve(value);
      });
    });
  }

  /**
   * @template {keyof Events} K
   * @param {K} type
   * @param {Events[K]} value
   */
  emit(type, value) {
    for (const handler of [...(this.#handlers.get(type) ?? [])]) {
      try {
        handler(value);
      } catch (error) {
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
