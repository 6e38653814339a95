import { ErrorBodySchema, ROUTES, type RouteSpec } from "@tessera/core/http";
import { z } from "zod";

const schema = (type: z.ZodType, io: "input" | "output") =>
  z.toJSONSchema(type, { io, unrepresentable: "any", target: "openapi-3.0" });

/**
 * The routes that read the caller's trace (docs/service.md, "Traces"): the four that decide. A
 * settle reads none: its call's trace is the claim's.
 */
const TRACED = new Set(["authorize", "sendMessage", "a2uiClaim", "a2uiCall"]);
/** The A2UI gate's routes: 404 where no catalog is configured (a settle: no such open handle). */
const A2UI = new Set(["a2uiClaim", "a2uiSettle", "a2uiCall"]);
const TRACEPARENT = {
  name: "traceparent",
  in: "header",
  required: false,
  description:
    "W3C Trace Context: the decision's audit event carries its trace ID, and webhook deliveries continue the trace. A malformed value is ignored (a new trace), never an error.",
  schema: { type: "string", pattern: "^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}(-.*)?$" },
};
const TRACESTATE = {
  name: "tracestate",
  in: "header",
  required: false,
  description:
    "W3C Trace Context: vendors' state that came with a valid traceparent, passed on unchanged with the trace (webhook deliveries, the A2UI function endpoint). Dropped whole when it does not parse (over 512 characters or 32 members, a malformed member, a key twice), never an error.",
  schema: { type: "string", maxLength: 512 },
};

/** The OpenAPI 3 document of the service, generated from the same zod contracts it validates with. */
export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  const error = { content: { "application/json": { schema: schema(ErrorBodySchema, "output") } } };
  for (const [name, route] of Object.entries(ROUTES) as [string, RouteSpec][]) {
    const path = route.path.replace(/:(\w+)/g, "{$1}");
    const parameters = [
      ...[...route.path.matchAll(/:(\w+)/g)].map((m) => ({
        name: m[1],
        in: "path",
        required: true,
        schema: { type: "string" },
      })),
      ...queryParameters(route.query),
      ...(TRACED.has(name) ? [TRACEPARENT, TRACESTATE] : []),
    ];
    paths[path] ??= {};
    paths[path][route.method.toLowerCase()] = {
      operationId: name,
      ...(route.role === "public" ? { security: [] } : {}),
      ...(parameters.length > 0 ? { parameters } : {}),
      ...(route.body === undefined
        ? {}
        : {
            requestBody: {
              required: true,
              content: { "application/json": { schema: schema(route.body, "input") } },
            },
          }),
      responses: {
        200: {
          description: 'The answer; a refusal is a 200 with `status: "denied"`.',
          content: { "application/json": { schema: schema(route.response, "output") } },
        },
        ...(route.role === "public"
          ? name === "ready"
            ? { 503: { description: "Not ready: the store does not answer.", ...error } }
            : {}
          : {
              400: { description: "Invalid request: `error.field` names the field.", ...error },
              401: { description: "No or unknown bearer token.", ...error },
              403: { description: "The token's role may not use this route.", ...error },
              ...(A2UI.has(name)
                ? {
                    404: {
                      description:
                        name === "a2uiSettle"
                          ? "No A2UI catalog is configured, or no open dispatch has this handle (`not_found`)."
                          : "No A2UI catalog is configured (`not_found`).",
                      ...error,
                    },
                  }
                : {}),
              ...(route.retrySafe
                ? {
                    409: {
                      description:
                        "The call ID was used with another body (`call_id_conflict`), or another request holds it and has not answered yet (`call_in_progress`).",
                      ...error,
                    },
                  }
                : {}),
              ...(name === "deriveGrant"
                ? {
                    409: {
                      description:
                        "The parent has fewer unspent uses than the child asks for (`delegation_budget_exhausted`): none were spent.",
                      ...error,
                    },
                  }
                : {}),
              ...(route.body === undefined
                ? {}
                : {
                    413: { description: "The body is over the size limit.", ...error },
                    415: { description: "The body is not `application/json`.", ...error },
                  }),
              503: { description: "A store did not answer: nothing was decided.", ...error },
            }),
      },
    };
  }
  return {
    openapi: "3.0.3",
    info: { title: "Tessera service", version: "0.1.0" },
    components: { securitySchemes: { bearer: { type: "http", scheme: "bearer" } } },
    security: [{ bearer: [] }],
    paths,
  };
}

function queryParameters(query: z.ZodType | undefined) {
  if (!(query instanceof z.ZodObject)) return [];
  return Object.entries(query.shape as Record<string, z.ZodType>).map(([name, type]) => ({
    name,
    in: "query",
    required: !type.safeParse(undefined).success,
    schema: schema(type, "input"),
  }));
}
