import type { Command } from "commander";

/**
 * Every subcommand, by name, with its one-line summary and a loader. Each command module pulls
 * in what its action needs (the stores, the service, the gateway, zod schemas): loading all of
 * them took 1 to 2.3 s on this machine before `tessera --version` printed. The CLI loads only
 * the module of the command it runs; the others appear in `tessera --help` from this table,
 * whose summaries a test keeps equal to the commands' own descriptions.
 */
export interface CommandEntry {
  readonly name: string;
  readonly summary: string;
  readonly load: () => Promise<Command>;
}

export const COMMANDS: readonly CommandEntry[] = [
  {
    name: "demo",
    summary: "run a demo; every figure is measured from the run",
    load: async () => (await import("./demo.js")).demoCommand(),
  },
  {
    name: "claims",
    summary: "inspect A2UI function-call claims",
    load: async () => (await import("./claims.js")).claimsCommand(),
  },
  {
    name: "grants",
    summary: "issue, revoke and list capability grants",
    load: async () => (await import("./grants.js")).grantsCommand(),
  },
  {
    name: "audit",
    summary: "read the audit trail",
    load: async () => (await import("./audit.js")).auditCommand(),
  },
  {
    name: "explain",
    summary: 'tell "spent" from "never granted" (and revoked, expired, …) for one call',
    load: async () => (await import("./explain.js")).explainCommand(),
  },
  {
    name: "init",
    summary:
      "provision a data directory for tessera serve: private claim directory, SQLite database, config, first issuer token and first agent token",
    load: async () => (await import("./init.js")).initCommand(),
  },
  {
    name: "serve",
    summary:
      "serve the kernel over HTTP from a data directory (tessera init) or a store URL and principals file; flags win over TESSERA_* variables, which win over the data directory's tessera.json",
    load: async () => (await import("./serve.js")).serveCommand(),
  },
  {
    name: "tokens",
    summary: "manage the bearer tokens of the principals file",
    load: async () => (await import("./tokens.js")).tokensCommand(),
  },
  {
    name: "mcp",
    summary:
      "run the MCP gateway in front of the upstream MCP servers a config file names: per-tool grants, single-use tickets and replay claims (Streamable HTTP at /mcp, or --stdio)",
    load: async () => (await import("./mcp.js")).mcpCommand(),
  },
  {
    name: "report",
    summary:
      "run the two-workers cases and the fan-out scenes live and write the measured-verdicts page (one self-contained HTML file)",
    load: async () => (await import("./report.js")).reportCommand(),
  },
];
