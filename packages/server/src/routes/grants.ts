import { randomUUID } from "node:crypto";
import { isTesseraError } from "@tessera/core";
import { IssueGrantRequestSchema, ROUTES } from "@tessera/core/http";
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.js";
import { HttpProblem, parse } from "../errors.js";
import { principalOf } from "./decisions.js";
import { chainRoots } from "./derive.js";

/**
 * Grants, for issuer tokens only. The namespace and the issuer are the token's: an issuer
 * cannot mint in another namespace, nor in another issuer's name. It lists and revokes the
 * grants whose chain starts at its `authority`: those it issued, and the children derived
 * from them (`POST /v1/grants/derive`), whose own issuer is the delegator.
 */
export function grantRoutes(app: FastifyInstance, context: ServiceContext): void {
  const { grants, usage } = context.stores;
  const route = (name: "issueGrant" | "listGrants" | "revokeGrant") => ({
    method: ROUTES[name].method,
    url: ROUTES[name].path,
    config: { role: ROUTES[name].role },
  });

  app.route({
    ...route("issueGrant"),
    handler: async (request) => {
      const body = parse(IssueGrantRequestSchema, request.body, "body");
      const issuer = principalOf(request);
      try {
        const grant = await grants.add({
          id: body.id ?? randomUUID(),
          namespaceId: issuer.namespaceId,
          issuer: issuer.authority,
          subject: body.subject,
          capabilities: body.capabilities,
          ...(body.constraints === undefined ? {} : { constraints: body.constraints }),
          issuedAt: body.issuedAt ?? new Date().toISOString(),
        });
        return { grant };
      } catch (error) {
        if (isTesseraError(error, "invalid_grant")) {
          throw new HttpProblem("invalid_grant", error.message, "id");
        }
        throw error;
      }
    },
  });

  app.route({
    ...route("listGrants"),
    handler: async (request) => {
      const issuer = principalOf(request);
      const namespace = await grants.listNamespace(issuer.namespaceId);
      // A derived child's `issuer` is its delegator: it is the token's by its chain's root.
      // Compared as `g.issuer` alone, the children the token derived were neither listed nor
      // revocable (`revoked: false`, like a missing grant), and stayed in force.
      const root = chainRoots(namespace);
      const own = namespace.filter((g) => root(g) === issuer.authority);
      const uses = await Promise.all(own.map((g) => usage.getUsage(g.namespaceId, g.id)));
      return { grants: own.map((grant, i) => ({ grant, uses: uses[i] ?? 0 })) };
    },
  });

  app.route({
    ...route("revokeGrant"),
    handler: async (request) => {
      const issuer = principalOf(request);
      const { grantId } = request.params as { grantId: string };
      // Another issuer's grant (one whose chain starts elsewhere) answers like a missing one.
      const namespace = await grants.listNamespace(issuer.namespaceId);
      const found = namespace.find((g) => g.id === grantId);
      const grant =
        found !== undefined && chainRoots(namespace)(found) === issuer.authority
          ? found
          : undefined;
      return {
        revoked: grant === undefined ? false : await grants.revoke(issuer.namespaceId, grantId),
      };
    },
  });
}
