import { randomUUID } from "node:crypto";
import { isTesseraError } from "@tessera/core";
import { IssueGrantRequestSchema, ROUTES } from "@tessera/core/http";
import type { FastifyInstance } from "fastify";
import type { ServiceContext } from "../context.js";
import { HttpProblem, parse } from "../errors.js";
import { principalOf } from "./decisions.js";

/**
 * Grants, for issuer tokens only. The namespace and the issuer are the token's: an issuer
 * cannot mint in another namespace, nor in another issuer's name.
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
      const own = (await grants.listNamespace(issuer.namespaceId)).filter(
        (g) => g.issuer === issuer.authority,
      );
      const uses = await Promise.all(own.map((g) => usage.getUsage(g.namespaceId, g.id)));
      return { grants: own.map((grant, i) => ({ grant, uses: uses[i] ?? 0 })) };
    },
  });

  app.route({
    ...route("revokeGrant"),
    handler: async (request) => {
      const issuer = principalOf(request);
      const { grantId } = request.params as { grantId: string };
      // Another issuer's grant answers like a missing one.
      const grant = (await grants.listNamespace(issuer.namespaceId)).find(
        (g) => g.id === grantId && g.issuer === issuer.authority,
      );
      return {
        revoked: grant === undefined ? false : await grants.revoke(issuer.namespaceId, grantId),
      };
    },
  });
}
