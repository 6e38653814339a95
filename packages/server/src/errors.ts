import { ERROR_CATALOG, type ErrorCode, isTesseraError } from "@tessera/core";
import type { ErrorBody } from "@tessera/core/http";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import type { z } from "zod";

/**
 * A request the service answers without a decision: `{ error: { code, message } }` with the
 * status of the code's row in `ERROR_CATALOG`, so a code and its status cannot drift apart
 * between the service, its docs and the client.
 */
export class HttpProblem extends Error {
  readonly status: number;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly field?: string,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(message);
    this.status = ERROR_CATALOG[code].httpStatus;
  }

  body(): ErrorBody {
    return {
      error: {
        code: this.code,
        message: this.message,
        ...(this.field === undefined ? {} : { field: this.field }),
      },
    };
  }
}

/**
 * Parses `value` with `schema`, or a 400 naming the first offending field. A caller that sends
 * `purpose` is told by name that it does not choose one: it believed it did.
 */
export function parse<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  if (typeof value === "object" && value !== null && Object.hasOwn(value, "purpose")) {
    throw new HttpProblem(
      "invalid_request",
      "purpose is not a request field: it comes from the principal's configuration",
      "purpose",
    );
  }
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const keys =
    issue?.code === "unrecognized_keys" ? [...issue.path, ...(issue.keys ?? []).slice(0, 1)] : [];
  const path = keys.length > 0 ? keys : (issue?.path ?? []);
  const field = path.map(String).join(".") || where;
  // The message is zod's own words about the field, never the value: a hostile value is not
  // echoed back into a response or a log. A field left out is said plainly: zod's words for
  // it ("expected nonoptional, received undefined") name its own internals.
  const missing = issue?.code === "invalid_type" && / received undefined$/.test(issue.message);
  const said = missing ? "required" : (issue?.message ?? "invalid");
  throw new HttpProblem("invalid_request", `${field}: ${said}`, field);
}

/**
 * Every error a route or Fastify throws, as one body. Only a store that did not answer is an
 * outage (503); anything not understood is this service's fault: a 500 whose cause is logged.
 */
export function handleError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  const problem = toProblem(error);
  // The cause of every 5xx is logged: a 503 (a store outage, expected to pass) as a warning.
  if (problem.code === "unavailable") request.log.warn({ err: error }, "store unavailable");
  else if (problem.status >= 500) request.log.error({ err: error }, "request failed");
  void reply.code(problem.status).headers(problem.headers).send(problem.body());
}

function toProblem(error: FastifyError): HttpProblem {
  if (error instanceof HttpProblem) return error;
  if (isTesseraError(error) && error.code.endsWith("_unavailable")) {
    return new HttpProblem("unavailable", "a store did not answer: nothing was decided");
  }
  switch (error.code) {
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new HttpProblem("unsupported_media_type", "send the body as application/json");
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new HttpProblem("body_too_large", "the body is larger than the limit");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new HttpProblem("invalid_request", "the body is empty: send a JSON object");
    // Fastify's parser raises one error for both, so the message names both.
    case "FST_ERR_CTP_INVALID_JSON_BODY":
      return new HttpProblem(
        "invalid_request",
        "the body is not valid JSON, or holds a __proto__ or constructor.prototype key, which is refused",
      );
  }
  const status = error.statusCode ?? 500;
  if (status >= 400 && status < 500) {
    // Fastify's own 4xx (a poisoned __proto__ key, a bad content length): no decision.
    return new HttpProblem("invalid_request", "the request is malformed");
  }
  return new HttpProblem("internal_error", "the request failed");
}
