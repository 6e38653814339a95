import { Counter, Histogram, Registry } from "prom-client";
import type { ServiceStores } from "./service.js";

/** The service's Prometheus metrics, in a registry of its own (two services never mix). */
export class Metrics {
  readonly registry = new Registry();
  readonly decisions = new Counter({
    name: "tessera_decisions_total",
    help: "Decisions taken, by route, outcome (allowed, delivered, denied) and caller code.",
    labelNames: ["route", "outcome", "code"] as const,
    registers: [this.registry],
  });
  readonly claims = new Counter({
    name: "tessera_claims_total",
    help: "Retry-safe calls by receipt status: dispatched, denied, failed, or none (a replay).",
    labelNames: ["route", "status"] as const,
    registers: [this.registry],
  });
  readonly store = new Histogram({
    name: "tessera_store_seconds",
    help: "Store call latency, by port and operation.",
    labelNames: ["port", "op"] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });

  /** The stores, each call timed into `tessera_store_seconds`. */
  timed(stores: ServiceStores): ServiceStores {
    return {
      grants: this.#timed("grants", stores.grants),
      usage: this.#timed("usage", stores.usage),
      audit: this.#timed("audit", stores.audit),
      claims: this.#timed("claims", stores.claims),
    };
  }

  #timed<T extends object>(port: string, target: T): T {
    const histogram = this.store;
    // One wrapper per method, made on first use: a decision calls several store methods, and a
    // fresh closure per call was measurable on the denied path.
    const wrapped = new Map<string, unknown>();
    return new Proxy(target, {
      get(object, property) {
        const value = Reflect.get(object, property, object);
        if (typeof value !== "function" || typeof property !== "string") return value;
        const known = wrapped.get(property);
        if (known !== undefined) return known;
        const timed = (...args: unknown[]) => {
          const end = histogram.startTimer({ port, op: property });
          let result: unknown;
          try {
            result = value.apply(object, args);
          } catch (error) {
            end();
            throw error;
          }
          if (result instanceof Promise) return result.finally(end);
          end();
          return result;
        };
        wrapped.set(property, timed);
        return timed;
      },
    });
  }
}
