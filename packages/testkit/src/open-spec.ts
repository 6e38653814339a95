import { isAbsolute } from "node:path";
import { pathToFileURL } from "node:url";
import type { ProcessSpec } from "./factory.js";

/**
 * What a worker process opens from a `ProcessSpec`: the module imported (a package name, or an
 * absolute path), its export called with `arg`. `exportName` may be a dotted path to a static
 * method (`DirectoryClaimStore.open`), called with its owner as `this`. Shared by the
 * conformance worker and the several-grants worker.
 */
export async function openFromSpec(spec: ProcessSpec): Promise<unknown> {
  const specifier =
    isAbsolute(spec.module) && !spec.module.startsWith("file:")
      ? pathToFileURL(spec.module).href
      : spec.module;
  const mod = (await import(specifier)) as Record<string, unknown>;
  let owner: unknown;
  let target: unknown = mod;
  for (const part of spec.exportName.split(".")) {
    owner = target;
    target = (target as Record<string, unknown> | undefined)?.[part];
  }
  if (typeof target !== "function") {
    throw new Error(`worker: ${spec.exportName} is not a function of ${spec.module}`);
  }
  return (target as (arg: unknown) => unknown).call(owner, spec.arg);
}
