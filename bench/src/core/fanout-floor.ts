import { performance } from "node:perf_hooks";
import { CTX, NS, recipient } from "./kernel-fixtures.js";

/**
 * The floor under the fan-out's scaling: the objects a 10,000-recipient fan-out keeps alive
 * (a frozen ticket per recipient, held by the grant store and the turn's index, its use
 * counted, the decision's audit event, the delivered envelope and its reply, the send's
 * result), built and kept in a plain loop with no kernel, no validation and no promises.
 *
 * The kernel's time grows faster than 10× from 1,000 to 10,000 recipients because more of
 * what a fan-out allocates is still alive when V8's young generation fills, and each scavenge
 * copies it. This loop pays that cost and nothing else, so its own ratio is the best ratio a
 * fan-out that keeps these objects can show on this machine's V8.
 */
export function retainedObjectsMs(recipients: number): number {
  const start = performance.now();
  const names = Array.from({ length: recipients }, (_, i) => recipient(i));
  const actions = Object.freeze(["message.send"]);
  const constraints = Object.freeze({ maxUses: 1 });
  const store = new Map<string, object>();
  const index = new Map<string, { id: string }>();
  for (let i = 0; i < names.length; i++) {
    const to = names[i] as string;
    const ticket = Object.freeze({
      id: `ticket-${i}`,
      namespaceId: NS,
      issuer: CTX.authority,
      subject: CTX.actor,
      capabilities: Object.freeze([
        Object.freeze({
          resource: Object.freeze({
            namespace: "agents",
            path: Object.freeze([to]),
            owner: CTX.owner,
          }),
          actions,
          scope: "exact",
        }),
      ]),
      constraints,
      issuedAt: "2026-01-01T00:00:00.000Z",
    });
    store.set(ticket.id, ticket);
    index.set(to, ticket);
  }
  const used = new Map<string, number>();
  const events: object[] = [];
  const delivered: object[] = [];
  const results: object[] = [];
  const at = new Date().toISOString();
  for (let i = 0; i < names.length; i++) {
    const to = names[i] as string;
    const ticket = index.get(to) as { id: string };
    used.set(ticket.id, (used.get(ticket.id) ?? 0) + 1);
    const callId = `call-${i}`;
    events.push(
      Object.freeze({
        at,
        source: "kernel",
        outcome: "allowed",
        code: null,
        reason: "allowed",
        traceId: CTX.traceId,
        callId,
        namespaceId: NS,
        actor: CTX.actor,
        authority: CTX.authority,
        owner: CTX.owner,
        grantId: ticket.id,
        action: "message.send",
        resource: `agents:${to}`,
      }),
    );
    const envelope = Object.freeze({
      messageId: `message-${i}`,
      sender: CTX.actor,
      recipient: to,
      payload: "q",
      traceId: CTX.traceId,
      callId,
      grantId: ticket.id,
    });
    delivered.push(envelope);
    const reply = `reply from ${to}`;
    results.push(
      Object.freeze({
        status: "delivered",
        messageId: envelope.messageId,
        grantId: ticket.id,
        reply,
      }),
    );
  }
  if (results.length !== recipients || events.length !== recipients || used.size !== recipients) {
    throw new Error("bench: the floor loop did not keep one of each per recipient");
  }
  return performance.now() - start;
}
