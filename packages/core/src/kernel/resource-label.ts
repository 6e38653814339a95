import { encodeLabelPart } from "../contracts/path-segment.js";

let lastNamespace: string | undefined;
let lastHead = "";

/**
 * Human form of a resource for audit: `namespace:/seg/seg`. Each part is percent-encoded where
 * it holds `%`, `:`, `/` or a control character, so two different resources never print the
 * same label (`["a/b"]` and `["a","b"]`, or namespace `a:/b` and `a` with path `b:`).
 */
export function resourceLabel(namespace: string, path: readonly string[]): string {
  // A host decides in few namespaces, usually one: remember the last one's encoded head.
  if (namespace !== lastNamespace) {
    lastNamespace = namespace;
    lastHead = `${encodeLabelPart(namespace)}:/`;
  }
  let label = lastHead;
  for (let i = 0; i < path.length; i++) {
    label +=
      i === 0 ? encodeLabelPart(path[i] as string) : `/${encodeLabelPart(path[i] as string)}`;
  }
  return label;
}
