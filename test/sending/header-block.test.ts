import { describe, expect, it } from "vitest";
import { headerBlock, withoutHeaderFields } from "../../src/domain/sending/header-block";

const bcc = new Set(["bcc", "resent-bcc"]);
const strip = (text: string) => new TextDecoder("latin1").decode(withoutHeaderFields(new Uint8Array([...text].map((c) => c.charCodeAt(0))), bcc));

describe("withoutHeaderFields", () => {
  it.each([
    ["first field", "Bcc: a@x.test\r\nFrom: f@x.test\r\n\r\nbody", "From: f@x.test\r\n\r\nbody"],
    ["last field before the body", "From: f@x.test\r\nBcc: a@x.test\r\n\r\nbody", "From: f@x.test\r\n\r\nbody"],
    [
      "folded over tab and space lines",
      "From: f@x.test\r\nBCC: a@x.test,\r\n\tb@x.test,\r\n  c@x.test\r\nTo: t@x.test\r\n\r\n",
      "From: f@x.test\r\nTo: t@x.test\r\n\r\n",
    ],
    [
      "two fields apart, LF line ends",
      "Bcc: a@x.test\nFrom: f@x.test\nresent-bcc : b@x.test\nTo: t@x.test\n\nbody\n",
      "From: f@x.test\nTo: t@x.test\n\nbody\n",
    ],
    ["a message with no body", "From: f@x.test\r\nBcc: a@x.test", "From: f@x.test\r\n"],
  ])("removes a Bcc field as the %s", (_case, input, expected) => {
    expect(strip(input)).toBe(expected);
  });

  it("keeps look-alikes, 8-bit bytes and anything after the header block", () => {
    const input = "From: f@x.test\r\nX-Bcc: keep\r\nBccx: keep\r\nSubject: caf\xe9 Bcc: keep\r\n\r\nBcc: in the body\r\n";
    expect(strip(input)).toBe(input);
  });

  it("answers the same bytes, not a copy, when there is nothing to remove", () => {
    const raw = new TextEncoder().encode("From: f@x.test\r\n\r\nbody");
    expect(withoutHeaderFields(raw, bcc)).toBe(raw);
  });
});

const bytes = (value: string) => new TextEncoder().encode(value);

describe("headerBlock", () => {
  const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes);
  it("ends after the first empty line, CRLF or bare LF, and keeps folded lines", () => {
    const raw = bytes("From: a@b.test\r\nSubject: one\r\n two\r\n\r\nbody\r\n\r\nmore\r\n");
    expect(text(headerBlock(raw))).toBe("From: a@b.test\r\nSubject: one\r\n two\r\n\r\n");
    expect(text(headerBlock(bytes("From: a@b.test\n\nbody\n")))).toBe("From: a@b.test\n\n");
  });

  it("is the whole message when there is no empty line", () => {
    const raw = bytes("From: a@b.test\r\nSubject: no body");
    expect(headerBlock(raw)).toBe(raw);
  });
});
