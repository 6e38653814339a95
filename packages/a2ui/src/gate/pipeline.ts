/**
 * The gate's whole control flow, in the style of Hono's `compose`: stages run in order; the
 * first one that returns a refusal stops the pipeline and hands it to `onRefuse`; a stage
 * that throws stops it and hands the error, with the stage's name, to `onError`; when every
 * stage passes, `onDone` settles the outcome. Policy about what a refusal or an error means
 * lives in the handlers, so this function never changes when a stage does.
 */

export interface Stage<Context, Refusal> {
  readonly name: string;
  /** Returns a refusal to stop, nothing to continue. Synchronous stages pay no promise. */
  readonly run: (context: Context) => Refusal | undefined | Promise<Refusal | undefined>;
}

export interface PipelineHandlers<Context, Refusal, Result> {
  readonly onDone: (context: Context) => Promise<Result>;
  readonly onRefuse: (refusal: Refusal, context: Context) => Promise<Result>;
  readonly onError: (error: unknown, context: Context, stage: string) => Promise<Result>;
}

export function composeStages<Context, Refusal, Result>(
  stages: readonly Stage<Context, Refusal>[],
  handlers: PipelineHandlers<Context, Refusal, Result>,
): (context: Context) => Promise<Result> {
  return async (context) => {
    for (const stage of stages) {
      let refusal: Refusal | undefined;
      try {
        const outcome = stage.run(context);
        refusal = outcome instanceof Promise ? await outcome : outcome;
      } catch (error) {
        return handlers.onError(error, context, stage.name);
      }
      if (refusal !== undefined) return handlers.onRefuse(refusal, context);
    }
    return handlers.onDone(context);
  };
}
