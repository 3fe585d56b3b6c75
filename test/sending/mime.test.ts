import PostalMime from "postal-mime";
import { describe, expect, it } from "vitest";
import {
  buildMessageId,
  buildMimeMessage,
  encodeQuotedPrintable,
  formatRfc5322Date,
  MimeError,
  type MimeMessageInput,
} from "../../src/domain/sending/mime";

const pngBytes = Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0xff, 0xfe, 0x80]);
const pdfBytes = new Uint8Array(3000).map((_, i) => (i * 7 + 3) % 256);

function toBase64(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes));
}

function input(overrides: Partial<MimeMessageInput> = {}): MimeMessageInput {
  return {
    from: { name: "Acme, Inc.", address: "news@acme.test" },
    to: ["ann@example.org"],
    subject: "Hello",
    text: "Hello Ann",
    messageId: buildMessageId("msg_abc123", "news@acme.test"),
    date: new Date("2025-01-02T03:04:05Z"),
    ...overrides,
  };
}

function expectMimeError(run: () => unknown, code: MimeError["code"], field: string) {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(MimeError);
    expect((error as MimeError).code).toBe(code);
    expect((error as MimeError).field).toBe(field);
    return;
  }
  throw new Error(`expected a MimeError ${code} for ${field}`);
}

describe("buildMimeMessage", () => {
  it("builds a message that parses back with every header and part intact", async () => {
    const raw = buildMimeMessage(
      input({
        from: { name: "Zoë from Acme, Inc.", address: "news@acme.test" },
        to: ["ann@example.org", { name: "Bob Example", address: "bob@example.org" }],
        cc: [{ name: "Çarla", address: "carla@example.org" }],
        replyTo: { name: "Support", address: "support@acme.test" },
        subject: "Grüße — your order #42 has shipped 📦",
        text: "Plain text body\nsecond line",
        html: "<p>HTML body with €</p>",
        attachments: [
          { filename: "invoice.pdf", contentBase64: toBase64(pdfBytes), contentType: "application/pdf" },
          { filename: 'résumé "final".pdf', contentBase64: toBase64(pngBytes), contentType: "application/pdf" },
          { filename: "logo.png", contentBase64: toBase64(pngBytes), contentType: "image/png", contentId: "logo@acme" },
        ],
        headers: {
          "List-Unsubscribe": "<https://mail.acme.test/u/TOKEN123>, <mailto:unsubscribe@acme.test?subject=TOKEN123>",
          "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
          "X-Campaign-Id": "cmp_123",
        },
      }),
    );
    const email = await PostalMime.parse(raw);

    expect(email.from).toEqual({ name: "Zoë from Acme, Inc.", address: "news@acme.test" });
    expect(email.to).toEqual([
      { name: "", address: "ann@example.org" },
      { name: "Bob Example", address: "bob@example.org" },
    ]);
    expect(email.cc).toEqual([{ name: "Çarla", address: "carla@example.org" }]);
    expect(email.replyTo).toEqual([{ name: "Support", address: "support@acme.test" }]);
    expect(email.subject).toBe("Grüße — your order #42 has shipped 📦");
    expect(email.messageId).toBe("<msg_abc123@acme.test>");
    expect(email.date).toBe("2025-01-02T03:04:05.000Z");
    expect(email.text?.trimEnd()).toBe("Plain text body\nsecond line");
    expect(email.html?.trimEnd()).toBe("<p>HTML body with €</p>");

    const header = (key: string) => email.headers.find((h) => h.key === key)?.value;
    expect(header("list-unsubscribe")).toBe("<https://mail.acme.test/u/TOKEN123>, <mailto:unsubscribe@acme.test?subject=TOKEN123>");
    expect(header("list-unsubscribe-post")).toBe("List-Unsubscribe=One-Click");
    expect(header("x-campaign-id")).toBe("cmp_123");
    expect(header("mime-version")).toBe("1.0");

    expect(email.attachments.map((a) => [a.filename, a.mimeType, a.disposition, a.contentId ?? null])).toEqual([
      ["logo.png", "image/png", "inline", "<logo@acme>"],
      ["invoice.pdf", "application/pdf", "attachment", null],
      ['résumé "final".pdf', "application/pdf", "attachment", null],
    ]);
    const contentOf = (name: string) => new Uint8Array(email.attachments.find((a) => a.filename === name)!.content as ArrayBuffer);
    expect(contentOf("invoice.pdf")).toEqual(pdfBytes);
    expect(contentOf("logo.png")).toEqual(pngBytes);
  });

  it("writes only CRLF line endings, 7-bit content and lines within 998 (headers within 78) characters", () => {
    const raw = buildMimeMessage(
      input({
        subject: "Ünïcödé ".repeat(30),
        text: `a\nb\r\nc\rd ${"é".repeat(500)}`,
        html: `<div>${"x".repeat(5000)}</div>\n`,
        attachments: [{ filename: "big.bin", contentBase64: toBase64(pdfBytes), contentType: "application/octet-stream" }],
      }),
    );
    expect(raw.endsWith("\r\n")).toBe(true);
    expect(raw.replace(/\r\n/g, "")).not.toMatch(/[\r\n]/);
    expect(raw).toMatch(/^[\x00-\x7f]*$/);
    const lines = raw.split("\r\n");
    const headerLines = lines.slice(0, lines.indexOf(""));
    expect(Math.max(...headerLines.map((line) => line.length))).toBeLessThanOrEqual(78);
    expect(Math.max(...lines.slice(headerLines.length).map((line) => line.length))).toBeLessThanOrEqual(76);
  });

  it("sets Date and Message-ID exactly as given", () => {
    const raw = buildMimeMessage(input({ messageId: "<01HX@acme.test>", date: new Date("2024-03-05T10:00:00Z") }));
    expect(raw).toContain("\r\nMessage-ID: <01HX@acme.test>\r\n");
    expect(raw.startsWith("Date: Tue, 05 Mar 2024 10:00:00 +0000\r\n")).toBe(true);
    expect(formatRfc5322Date(new Date("2025-12-31T23:59:59Z"))).toBe("Wed, 31 Dec 2025 23:59:59 +0000");
    expect(buildMessageId("msg_1", "Someone@Sub.Example.COM")).toBe("<msg_1@sub.example.com>");
  });

  it("writes a plain ASCII subject and display name readable, without encoded words", () => {
    const raw = buildMimeMessage(input({ subject: "Your weekly report", from: { name: 'Acme "Team"', address: "news@acme.test" } }));
    expect(raw).toContain("\r\nSubject: Your weekly report\r\n");
    expect(raw).toContain('\r\nFrom: "Acme \\"Team\\"" <news@acme.test>\r\n');
  });

  it("rejects CR or LF in any header value with a typed error", () => {
    expectMimeError(() => buildMimeMessage(input({ subject: "Hi\r\nBcc: victim@example.org" })), "header_injection", "subject");
    expectMimeError(() => buildMimeMessage(input({ subject: "Hi\nthere" })), "header_injection", "subject");
    expectMimeError(
      () => buildMimeMessage(input({ from: { name: "Evil\rX-Injected: 1", address: "news@acme.test" } })),
      "header_injection",
      "from.name",
    );
    expectMimeError(() => buildMimeMessage(input({ headers: { "X-Tag": "a\r\nb" } })), "header_injection", "headers.X-Tag");
    expectMimeError(() => buildMimeMessage(input({ to: ["ann@example.org\r\nBcc: x@y.z"] })), "header_injection", "to[0].address");
    expectMimeError(
      () => buildMimeMessage(input({ attachments: [{ filename: "a\n.pdf", contentBase64: "", contentType: "application/pdf" }] })),
      "header_injection",
      "attachments[0].filename",
    );
  });

  it("rejects addresses that could smuggle extra recipients, bad header names and reserved headers", () => {
    expectMimeError(() => buildMimeMessage(input({ to: ["a@b.test>, <evil@x.test"] })), "invalid_address", "to[0].address");
    expectMimeError(() => buildMimeMessage(input({ replyTo: "not an address" })), "invalid_address", "replyTo.address");
    expectMimeError(() => buildMimeMessage(input({ headers: { "X Bad": "1" } })), "invalid_header_name", "headers.X Bad");
    expectMimeError(() => buildMimeMessage(input({ headers: { bcc: "x@y.z" } })), "reserved_header", "headers.bcc");
    expectMimeError(() => buildMimeMessage(input({ headers: { "DKIM-Signature": "v=1" } })), "reserved_header", "headers.DKIM-Signature");
    expectMimeError(() => buildMimeMessage(input({ headers: { "Content-Language": "en" } })), "reserved_header", "headers.Content-Language");
    expectMimeError(() => buildMimeMessage(input({ messageId: "no-brackets@acme.test" })), "invalid_message_id", "messageId");
    expectMimeError(
      () => buildMimeMessage(input({ attachments: [{ filename: "a", contentBase64: "%%%", contentType: "application/pdf" }] })),
      "invalid_attachment",
      "attachments[0].contentBase64",
    );
    expectMimeError(() => buildMimeMessage(input({ text: undefined })), "missing_body", "html");
  });

  it("gives an html-only message a text alternative generated from the html, links as `text [url]`", async () => {
    const htmlOnly = buildMimeMessage(input({ text: undefined, html: '<p><b>hi</b> <a href="https://acme.test/a">there</a></p>' }));
    expect(htmlOnly).toMatch(/^Content-Type: multipart\/alternative; boundary=/m);
    const parsed = await PostalMime.parse(htmlOnly);
    expect(parsed.html?.trim()).toBe('<p><b>hi</b> <a href="https://acme.test/a">there</a></p>');
    expect(parsed.text?.trim()).toBe("hi there [https://acme.test/a]");
  });

  it("builds a text-only message as a single part", async () => {
    const textOnly = buildMimeMessage(input({ html: undefined, text: "plain" }));
    expect(textOnly).toContain("Content-Type: text/plain; charset=UTF-8");
    expect(textOnly).not.toContain("multipart");
  });

  it("puts an inline image beside the bodies in multipart/related, with its Content-ID", async () => {
    const raw = buildMimeMessage(
      input({
        html: '<img src="cid:logo">',
        attachments: [{ filename: "logo.png", contentBase64: "iVBORw0=", contentType: "image/png", contentId: "logo" }],
      }),
    );
    expect(raw).toMatch(/^Content-Type: multipart\/related; boundary=/m);
    expect((await PostalMime.parse(raw)).attachments).toMatchObject([{ filename: "logo.png", disposition: "inline", contentId: "<logo>" }]);
  });
});

describe("encodeQuotedPrintable", () => {
  it("escapes =, non-ASCII, trailing whitespace and a leading From, and soft-breaks long lines", () => {
    expect(encodeQuotedPrintable("a=b é")).toBe("a=3Db =C3=A9");
    expect(encodeQuotedPrintable("tail \nx\t")).toBe("tail=20\r\nx=09");
    expect(encodeQuotedPrintable("From me\n.dot")).toBe("=46rom me\r\n.dot");
    const long = encodeQuotedPrintable("y".repeat(200));
    expect(long.split("\r\n").map((line) => line.length)).toEqual([76, 76, 50]);
    expect(long.replace(/=\r\n/g, "")).toBe("y".repeat(200));
  });
});
