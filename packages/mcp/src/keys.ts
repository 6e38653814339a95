/** The `_meta` key a client may set to make retries of one call recognisable across connections. */
export const IDEMPOTENCY_KEY = "io.tessera/idempotency-key";
/** The `_meta` key of every answer: the call ID `explain` takes. */
export const CALL_ID_KEY = "io.tessera/call-id";
/** The `_meta` key of a refusal: the caller code, nothing more. */
export const CODE_KEY = "io.tessera/code";
