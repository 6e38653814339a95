import { describe, expect, it } from "vitest";
import { redactCredentials } from "./log-redaction.js";

describe("redactCredentials", () => {
  it("keeps the routes' own parameters and redacts every other value, in any field", () => {
    const line = JSON.stringify({
      url: "/v1/audit?callId=c-1&traceId=t&limit=5&access_token=abc",
      msg: "Route GET:/v1/x?token=def&callId=c-2 not found",
    });
    const out = redactCredentials(line);
    expect(JSON.parse(out)).toEqual({
      url: "/v1/audit?callId=c-1&traceId=t&limit=5&access_token=[redacted]",
      msg: "Route GET:/v1/x?token=[redacted]&callId=c-2 not found",
    });
  });

  it("takes an escaped quote or backslash as part of the value, never as its end", () => {
    const line = JSON.stringify({ url: '/x?token=ab"cd\\ef&k=1' });
    const out = redactCredentials(line);
    expect(out).not.toMatch(/cd|ef/);
    expect(JSON.parse(out)).toEqual({ url: "/x?token=[redacted]&k=[redacted]" });
  });

  it("redacts bare items, odd names, and userinfo of an absolute URL", () => {
    const line = JSON.stringify({ url: "https://u:p4ss@h/x?tsk_bare&we%20ird=v" });
    expect(JSON.parse(redactCredentials(line))).toEqual({
      url: "https://[redacted]@h/x?[redacted]&[redacted]=[redacted]",
    });
  });

  it("leaves a line without a query alone", () => {
    const line = JSON.stringify({ msg: "request completed", res: { statusCode: 200 } });
    expect(redactCredentials(line)).toBe(line);
  });
});
