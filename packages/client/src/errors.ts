/**
 * Why a call produced no usable answer. A refusal is not one of these: a decision that
 * refused is a normal return with `status: "denied"` (HTTP 200), which the caller must read.
 *
 * `code` is stable; match on it, never on the message. It is the service's own code from its
 * error body (`unauthenticated`, `forbidden`, `invalid_request`, `conflict`, a store's
 * `*_unavailable`, …), or one of the client's: `service_unreachable` (no HTTP answer: refused,
 * reset, DNS, timeout), `invalid_response` (an answer that is not the documented shape, or a
 * redirect), `invalid_config` (thrown when the client is made) and `invalid_input` (nothing
 * was sent: a body, ID or header the request cannot carry).
 */
export class TesseraClientError extends Error {
  readonly code: string;
  /** The HTTP status, when the service answered. */
  readonly status: number | undefined;
  /** The request field the service named as wrong (a 400). */
  readonly field: string | undefined;
  /** The service's request ID (`x-request-id`), to find the request in its logs. */
  readonly requestId: string | undefined;
  /** Attempts made, retries included. */
  readonly attempts: number;

  constructor(
    code: string,
    message: string,
    details: {
      status?: number;
      field?: string;
      requestId?: string;
      attempts?: number;
      cause?: unknown;
    } = {},
  ) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "TesseraClientError";
    this.code = code;
    this.status = details.status;
    this.field = details.field;
    this.requestId = details.requestId;
    this.attempts = details.attempts ?? 1;
  }

  toJSON(): Record<string, unknown> {
    return {
      code: this.code,
      message: this.message,
      ...(this.status === undefined ? {} : { status: this.status }),
      ...(this.field === undefined ? {} : { field: this.field }),
      ...(this.requestId === undefined ? {} : { requestId: this.requestId }),
    };
  }
}

export function isTesseraClientError(value: unknown, code?: string): value is TesseraClientError {
  return value instanceof TesseraClientError && (code === undefined || value.code === code);
}

/** A failed attempt, with the service's Retry-After, which the final error does not carry. */
export class AttemptError extends TesseraClientError {
  retryAfterMs: number | undefined;

  withoutRetryHint(): TesseraClientError {
    const { status, field, requestId, attempts } = this;
    return new TesseraClientError(this.code, this.message, {
      ...(status === undefined ? {} : { status }),
      ...(field === undefined ? {} : { field }),
      ...(requestId === undefined ? {} : { requestId }),
      attempts,
      ...(this.cause === undefined ? {} : { cause: this.cause }),
    });
  }
}
