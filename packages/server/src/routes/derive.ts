import { randomUUID } from "node:crypto";
import {
  addDerivedGrant,
  deriveGrant,
  type Grant,
  isTesseraError,
  MAX_DELEGATION_DEPTH,
} from "@tessera/core";
import { DeriveGrantRequestSchema, ROUTES } from "@tessera/core/http";
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.js";
import { HttpProblem, parse } from "../errors.js";
import { principalOf } from "./decisions.js";

/**
 * `POST /v1/grants/derive`, for issuer tokens only: a narrower child of a grant the issuer's
 * chain holds, for the parent's holder to hand to a delegate. The delegator is the parent's
 * subject (the library's rule: only the holder derives), so the token needs no identity in the
 * body; an issuer may already issue that child outright, so deriving gives it nothing more,
 * while the child stays bound to its parent (revoked with it, its uses carved out of it).
 * A widened axis is refused with that axis's `delegation_*` code and nothing is stored.
 */
export function deriveRoute(app: FastifyInstance, context: ServiceContext): void {
  const { grants, usage } = context.stores;
  const spec = ROUTES.deriveGrant;
  app.route({
    method: spec.method,
    url: spec.path,
    config: { role: spec.role },
    handler: async (request) => {
      const body = parse(DeriveGrantRequestSchema, request.body, "body");
      const issuer = principalOf(request);
      const namespace = await grants.listNamespace(issuer.namespaceId);
      const parent = namespace.find((g) => g.id === body.parentId);
      // Another issuer's grant answers like a missing one, as revoking it does.
      if (parent === undefined || rootIssuer(parent, namespace) !== issuer.authority) {
        throw new HttpProblem("invalid_input", "no such parent grant", "parentId");
      }
      const id = body.id ?? randomUUID();
      // Checked before any use is carved: a retry of a derive that landed spends nothing again.
      if (namespace.some((g) => g.id === id)) {
        throw new HttpProblem("invalid_grant", "that grant ID is taken in this namespace", "id");
      }
      const now = new Date().toISOString();
      // Now, unless the parent is dated later: a child opening before its parent would widen.
      const issuedAt =
        body.issuedAt ?? (Date.parse(parent.issuedAt) > Date.parse(now) ? parent.issuedAt : now);
      try {
        const child = deriveGrant(
          parent,
          {
            id,
            subject: body.subject,
            capabilities: body.capabilities,
            ...(body.constraints === undefined ? {} : { constraints: body.constraints }),
            issuedAt,
          },
          { issuer: parent.subject },
        );
        // Spent before the child exists: a crash in between loses uses, never gains any; a
        // child the store refuses (its ID taken by a racing derive) gets them given back.
        return { grant: await addDerivedGrant(grants, usage, parent, child) };
      } catch (error) {
        if (isTesseraError(error) && error.code.startsWith("delegation_")) {
          throw new HttpProblem(error.code, error.message);
        }
        if (isTesseraError(error, "invalid_grant")) {
          throw new HttpProblem("invalid_grant", error.message);
        }
        throw error;
      }
    },
  });
}

/**
 * The issuer at the root of `grant`'s chain, read from the namespace's grants; undefined when
 * a link is missing or the chain is longer than any derivation can make (a cycle). An issuer
 * token holds the grants whose chain starts at its `authority`: it derives from, lists and
 * revokes exactly those (grants.ts).
 */
export function rootIssuer(grant: Grant, namespace: readonly Grant[]): string | undefined {
  return chainRoots(namespace)(grant);
}

/** `rootIssuer` for many grants of one namespace: its grants indexed once, not per grant. */
export function chainRoots(namespace: readonly Grant[]): (grant: Grant) => string | undefined {
  const byId = new Map(namespace.map((g) => [g.id, g]));
  return (grant) => {
    let link: Grant | undefined = grant;
    for (let step = 0; step <= MAX_DELEGATION_DEPTH && link !== undefined; step++) {
      if (link.parentId === undefined) return link.issuer;
      link = byId.get(link.parentId);
    }
    return undefined;
  };
}
