/**
 * Credentials never reach a log line. A client may put a token in the request target
 * (`?access_token=…`, `http://user:pass@host/…`) however the service answers it, and the
 * target is written by Fastify's request line, its "route not found" message and some of its
 * error messages, not only by our serializer. So this runs on every serialized line, as pino's
 * last step before the stream: whatever wrote the target, its credentials are gone.
 *
 * An allowlist, not a list of credential names: only the query parameters of the service's
 * own routes keep their values (an operator needs `callId` to follow a call); every other
 * value, and every bare item (`?tsk_…`), is `[redacted]`. A name that is not plain is too.
 */
const KEPT = new Set(["callId", "traceId", "limit"]);

// Inside a JSON line a value ends at `&`, `#`, white space or the end of its JSON string (an
// unescaped quote); an escape pair (`\"`, `\\`) is taken whole, so no part of a value slips
// past one. `;` is not a separator: Fastify's query parser does not split on it.
const QUERY_ITEM = /([?&])((?:[^=&#"\\\s]|\\.)+)(=(?:[^&#"\\\s]|\\.)*)?/g;
const USERINFO = /([a-zA-Z][a-zA-Z0-9+.-]*:\/\/)(?:[^/?#@"\\\s]|\\.)+@/g;
const PLAIN_NAME = /^[A-Za-z0-9_.-]{1,64}$/;

export function redactCredentials(line: string): string {
  return line
    .replace(USERINFO, "$1[redacted]@")
    .replace(QUERY_ITEM, (item, separator: string, name: string, value: string | undefined) => {
      if (value === undefined) return `${separator}[redacted]`;
      if (KEPT.has(name)) return item;
      return `${separator}${PLAIN_NAME.test(name) ? name : "[redacted]"}=[redacted]`;
    });
}
