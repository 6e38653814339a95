import { describe, expect, it } from "vitest";
import { ctx, grant, OWNER, rig } from "../../test/fixtures.js";
import {
  createKernel,
  isTesseraError,
  type Kernel,
  messageSendCapability,
  type TurnAuthority,
  type TurnDriver,
  TurnExecutor,
} from "../index.js";
import { ScriptedDriver } from "../testing.js";

/** Watches every lease a kernel opens, so each test can check the lease was closed. */
function watched(kernel: Kernel): { kernel: Kernel; leases: TurnAuthority[] } {
  const leases: TurnAuthority[] = [];
  return {
    leases,
    kernel: {
      openTurnAuthority: async (context) => {
        const lease = await kernel.openTurnAuthority(context);
        leases.push(lease);
        return lease;
      },
    },
  };
}

async function setup() {
  const r = rig();
  await r.grants.add(grant({ capabilities: [messageSendCapability("bob", OWNER)] }));
  return { r, ...watched(r.kernel) };
}

const never = new Promise<never>(() => undefined);

describe("TurnExecutor closes the lease on every exit path", () => {
  it("success: a scripted driver completes; results are the kernel's", async () => {
    const { r, kernel, leases } = await setup();
    const driver = new ScriptedDriver([
      { tool: "list_tools" },
      { tool: "messages.send", recipient: "bob", payload: "hi", callId: "s1" },
      { tool: "messages.send", recipient: "eve", payload: "hi", callId: "s2" },
    ]);
    const outcome = await new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 10 }).run(
      ctx(),
      driver,
    );
    expect(outcome).toEqual({ status: "completed", steps: 3, traceId: "trace-1" });
    expect(driver.results[0]).toEqual(["messages.send"]);
    expect(driver.results[1]).toMatchObject({ status: "delivered", reply: "reply from bob" });
    expect(driver.results[2]).toEqual({ status: "denied", code: "no_matching_grant" });
    expect(leases).toHaveLength(1);
    expect(leases[0]?.closed).toBe(true);
    expect(r.transport.delivered).toHaveLength(1);
  });

  it("thrown error: rethrown after the lease is closed", async () => {
    const { kernel, leases } = await setup();
    const driver: TurnDriver = {
      step: async () => {
        throw new Error("model crashed");
      },
    };
    await expect(
      new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 10 }).run(ctx(), driver),
    ).rejects.toThrow("model crashed");
    expect(leases[0]?.closed).toBe(true);
  });

  it("abort: the caller's signal ends the turn, closes the lease, and the step's later acts are refused", async () => {
    const { r, kernel, leases } = await setup();
    const controller = new AbortController();
    let lateResult: unknown;
    const driver: TurnDriver = {
      step: async (tools, { signal }) => {
        controller.abort();
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        await new Promise((resolve) => setTimeout(resolve, 5));
        lateResult = await tools.sendMessage({ recipient: "bob", payload: "too late" });
        return "done";
      },
    };
    const outcome = await new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 10 }).run(
      ctx(),
      driver,
      { signal: controller.signal },
    );
    expect(outcome.status).toBe("aborted");
    expect(leases[0]?.closed).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(lateResult).toEqual({ status: "denied", code: "turn_closed" });
    expect(r.transport.delivered).toHaveLength(0);
  });

  it("abort before the turn starts: no step runs", async () => {
    const { kernel, leases } = await setup();
    const controller = new AbortController();
    controller.abort();
    let stepped = 0;
    const driver: TurnDriver = {
      step: async () => {
        stepped++;
        return never;
      },
    };
    const outcome = await new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 10 }).run(
      ctx(),
      driver,
      {
        signal: controller.signal,
      },
    );
    expect(outcome).toMatchObject({ status: "aborted", steps: 0 });
    expect(stepped).toBe(0);
    expect(leases[0]?.closed).toBe(true);
  });

  it("timeout: a step that never settles ends the turn at the deadline", async () => {
    const { kernel, leases } = await setup();
    const driver: TurnDriver = { step: () => never };
    const outcome = await new TurnExecutor(kernel, { deadlineMs: 30, maxSteps: 10 }).run(
      ctx(),
      driver,
    );
    expect(outcome).toMatchObject({ status: "timed_out", steps: 0 });
    expect(leases[0]?.closed).toBe(true);
  });

  it("step budget: a driver that never finishes stops after maxSteps", async () => {
    const { kernel, leases } = await setup();
    let steps = 0;
    const driver: TurnDriver = {
      step: async () => {
        steps++;
        return "continue";
      },
    };
    const outcome = await new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 4 }).run(
      ctx(),
      driver,
    );
    expect(outcome).toMatchObject({ status: "step_budget_exhausted", steps: 4 });
    expect(steps).toBe(4);
    expect(leases[0]?.closed).toBe(true);
  });

  it("an empty script completes in one step", async () => {
    const { kernel } = await setup();
    const outcome = await new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 1 }).run(
      ctx(),
      new ScriptedDriver([]),
    );
    expect(outcome.status).toBe("completed");
  });

  it("a synchronous driver's plain return values are accepted as well", async () => {
    const { kernel, leases } = await setup();
    let steps = 0;
    const driver = {
      step: () => (++steps < 3 ? "continue" : "done"),
    } as unknown as TurnDriver;
    const outcome = await new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 10 }).run(
      ctx(),
      driver,
    );
    expect(outcome).toMatchObject({ status: "completed", steps: 3 });
    expect(leases[0]?.closed).toBe(true);
  });

  it("refuses a nonsensical configuration with invalid_config", () => {
    const kernel = createKernel({ grants: { listGrants: async () => [] } });
    for (const options of [
      { deadlineMs: 0, maxSteps: 1 },
      { deadlineMs: 10, maxSteps: 0 },
      { deadlineMs: 10, maxSteps: 1.5 },
      // Past a timer's 32-bit bound, setTimeout fires after 1 ms: every turn would time out.
      { deadlineMs: 2_147_483_648, maxSteps: 1 },
      { deadlineMs: Number.POSITIVE_INFINITY, maxSteps: 1 },
    ]) {
      let error: unknown;
      try {
        new TurnExecutor(kernel, options);
      } catch (caught) {
        error = caught;
      }
      expect(isTesseraError(error, "invalid_config")).toBe(true);
    }
  });
});

describe("TurnExecutor's longest deadline", () => {
  it("keeps a turn with the longest deadline a timer can wait running to its end", async () => {
    const kernel = createKernel({ grants: { listGrants: async () => [] } });
    const driver = {
      step: async (_tools: unknown, { step }: { step: number }) => {
        // A macrotask between steps: a deadline timer that fired at once would win the race.
        await new Promise((resolve) => setTimeout(resolve, 5));
        return step < 2 ? ("continue" as const) : ("done" as const);
      },
    };
    const outcome = await new TurnExecutor(kernel, {
      deadlineMs: 2_147_483_647,
      maxSteps: 10,
    }).run(ctx(), driver);
    expect(outcome).toMatchObject({ status: "completed", steps: 3 });
  });
});

describe("TurnExecutor takes only the documented step results", () => {
  // A step result is "continue" or "done". Anything else, including an object shaped like the
  // executor's own stop signal, must not end the turn as the driver claims: the turn fails
  // closed with invalid_request, after the lease is closed, and nothing else runs.
  it.each([
    ["a forged stop signal", { stop: "completed" }],
    ["a forged timeout", { stop: "timed_out" }],
    ["an object", { type: "complete" }],
    ["null", null],
    ["undefined", undefined],
    ["another string", "completed"],
    ["a number", 1],
  ])("%s fails closed with invalid_request", async (_name, forged) => {
    const { kernel, leases } = await setup();
    let steps = 0;
    const driver = {
      step: async () => {
        steps++;
        return forged;
      },
    } as unknown as TurnDriver;
    let error: unknown;
    try {
      const outcome = await new TurnExecutor(kernel, { deadlineMs: 5_000, maxSteps: 10 }).run(
        ctx(),
        driver,
      );
      error = new Error(`the turn ended as ${JSON.stringify(outcome)}`);
    } catch (caught) {
      error = caught;
    }
    expect(isTesseraError(error, "invalid_request")).toBe(true);
    expect(steps).toBe(1);
    expect(leases).toHaveLength(1);
    expect(leases[0]?.closed).toBe(true);
  });
});
