import type { AuthorizeRequest, SendMessageRequest, TurnTools } from "../kernel/types.js";
import type { StepContext, TurnDriver } from "./turn-executor.js";

/** One scripted act: the tool calls a model would make, fixed in advance. */
export type ScriptedStep =
  | ({ readonly tool: "messages.send" } & SendMessageRequest)
  | ({ readonly tool: "authorize" } & AuthorizeRequest)
  | { readonly tool: "list_tools" };

/**
 * A driver that replays a fixed list of tool calls, one per step, and keeps every result in
 * order. Demos and tests use it in place of a model.
 */
export class ScriptedDriver implements TurnDriver {
  readonly #script: readonly ScriptedStep[];
  readonly #results: unknown[] = [];

  constructor(script: readonly ScriptedStep[]) {
    this.#script = Object.freeze([...script]);
  }

  /** The result of each step taken so far, in order. */
  get results(): readonly unknown[] {
    return this.#results;
  }

  async step(tools: TurnTools, { step }: StepContext): Promise<"continue" | "done"> {
    const act = this.#script[step];
    if (act === undefined) return "done";
    switch (act.tool) {
      case "messages.send": {
        const { tool: _tool, ...request } = act;
        this.#results.push(await tools.sendMessage(request));
        break;
      }
      case "authorize": {
        const { tool: _tool, ...request } = act;
        this.#results.push(await tools.authorize(request));
        break;
      }
      case "list_tools":
        this.#results.push(await tools.listTools());
        break;
    }
    return step + 1 >= this.#script.length ? "done" : "continue";
  }
}
