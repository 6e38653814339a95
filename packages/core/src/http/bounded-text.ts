/**
 * The body of a fetch `response` as text (decoded as `response.text()` decodes: UTF-8, a
 * leading byte order mark dropped), or undefined once it is longer than `maxBytes`: by its
 * `content-length` before anything is read, or as it arrives. The rest is never read and the
 * connection is let go. `response.text()` reads whatever comes until the deadline, so a peer
 * that streams without end (an impostor, a receiver gone wrong) fills the reader's memory:
 * the service reads webhook and function-endpoint answers through this, the client the
 * service's.
 */
export async function readBoundedText(
  response: Response,
  maxBytes: number,
): Promise<string | undefined> {
  const declared = Number(response.headers.get("content-length") ?? Number.NaN);
  if (declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    return undefined;
  }
  if (response.body === null) return "";
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let size = 0;
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return undefined;
    }
    text += decoder.decode(value, { stream: true });
  }
  return text + decoder.decode();
}
