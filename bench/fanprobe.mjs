// temporary probe (not committed): fan-out phases and GC
import { PerformanceObserver, performance } from "node:perf_hooks";
import { createKernel, InMemoryAuditSink, InMemoryGrantStore, InMemoryGrantUsageStore, InProcessTransport, issueFanoutTickets } from "@tessera/core";
const CTX = { namespaceId: "bench", actor: "asker", authority: "host", owner: "alice", traceId: "t" };
let gcMs = 0, gcs = 0;
new PerformanceObserver((list) => { for (const e of list.getEntries()) { gcMs += e.duration; gcs++; } }).observe({ entryTypes: ["gc"] });
async function once(n) {
  const t0 = performance.now(); const g0 = gcMs, c0 = gcs;
  const grants = new InMemoryGrantStore(); const usage = new InMemoryGrantUsageStore(); const transport = InProcessTransport.echo();
  const names = Array.from({ length: n }, (_, i) => `colleague-${i}`);
  await issueFanoutTickets(grants, { namespaceId: "bench", issuer: "host", subject: "asker", owner: "alice", recipients: names });
  const t1 = performance.now();
  const kernel = createKernel({ grants, usage, transport, audit: new InMemoryAuditSink() });
  const turn = await kernel.openTurnAuthority(CTX);
  const t2 = performance.now();
  for (const to of names) await turn.sendMessage({ recipient: to, payload: "q" });
  await turn.close();
  const t3 = performance.now();
  await new Promise((r) => setTimeout(r, 5));
  return { n, wall: t3 - t0, issue: t1 - t0, open: t2 - t1, send: t3 - t2, gcMs: gcMs - g0, gcs: gcs - c0 };
}
const ONLY = process.env.N ? Number(process.env.N) : 0;
for (let i = 0; i < 3; i++) { await once(1000); await once(10000); }
const rows = [];
for (let i = 0; i < 7; i++) { if (!ONLY || ONLY === 1000) rows.push(await once(1000)); if (!ONLY || ONLY === 10000) rows.push(await once(10000)); }
const med = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
for (const n of [1000, 10000]) {
  const r = rows.filter((x) => x.n === n); if (!r.length) continue;
  console.log(n, ["wall", "issue", "open", "send", "gcMs", "gcs"].map((k) => `${k}=${med(r.map((x) => x[k])).toFixed(2)}`).join(" "));
}
