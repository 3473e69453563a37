/**
 * Errors the SDK throws or emits. Every one is a {@link VoxwireError} with a
 * `code` to branch on and, where there is one, a `hint` that says what to do.
 *
 *   VoxwireError          code: invalid_session_id, forbidden, unauthorized,
 *   │                           unreachable, protocol, ...
 *   └── VoxwireApiError   the gateway answered an error (has `status`)
 * @module
 */

export class VoxwireError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {{hint?: string | null, sid?: string | null, cause?: unknown}} [extra]
   */
  constructor(code, message, { hint = null, sid = null, cause } = {}) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = "VoxwireError";
    this.code = code;
    this.hint = hint;
    this.sid = sid;
  }

  toString() {
    return this.hint ? `${this.message} (${this.hint})` : this.message;
  }
}

/** An error answer from the gateway: its ErrorBody plus the HTTP status. */
export class VoxwireApiError extends VoxwireError {
  /**
   * @param {number} status
   * @param {{code?: string, message?: string, hint?: string | null, sid?: string | null}} body
   */
  constructor(status, body) {
    const hint =
      body.hint ?? (status === 401 ? "check the API key or token; create a key with `voxwire keys create`" : null);
    super(body.code ?? "api", body.message ?? `the gateway answered ${status}`, { hint, sid: body.sid ?? null });
    this.name = "VoxwireApiError";
    this.status = status;
  }
}
