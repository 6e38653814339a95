/**
 * The `sqlite:` store URL of a file path (and a query, with its `?`). The SQLite backend
 * percent-decodes the path, a `?` would start the query and a `#` is a fragment, which the
 * backend refuses: those three are escaped, so a directory named `d#1` or `50%` opens the file
 * that is there rather than another one, or none.
 */
export function sqliteUrlOf(path: string, query = ""): string {
  const escaped = path.replaceAll("%", "%25").replaceAll("?", "%3F").replaceAll("#", "%23");
  return `sqlite:${escaped}${query}`;
}
