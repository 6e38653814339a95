/** Human form of a resource for audit: `namespace:/seg/seg`. */
export function resourceLabel(namespace: string, path: readonly string[]): string {
  return path.length === 1 ? `${namespace}:/${path[0]}` : `${namespace}:/${path.join("/")}`;
}
