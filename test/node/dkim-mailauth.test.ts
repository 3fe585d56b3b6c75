import { dkimVerify } from "mailauth";
import { beforeAll, describe, expect, it } from "vitest";
import {
  dkimTxtValue,
  generateDkimEd25519KeyPair,
  generateDkimKeyPair,
  importDkimPrivateKey,
  signDkim,
  type DkimKeyPair,
  type DkimPrivateKey,
} from "../../src/domain/sending/dkim.ts";
import { buildMessageId, buildMimeMessage, type MimeMessageInput } from "../../src/domain/sending/mime.ts";

// dkim.ts and mime.ts use only WebCrypto and mimetext, so they run here unchanged; mailauth is an independent
// DKIM implementation (the one nodemailer's author maintains) that checks what the Worker would send.

const domain = "acme.test";
let rsa: DkimKeyPair;
let ed25519: DkimKeyPair;
let rsaKey: DkimPrivateKey;
let edKey: DkimPrivateKey;

// DNS TXT strings are at most 255 bytes; a 2048-bit RSA record is published as several strings of one record.
function txtChunks(value: string): string[] {
  return value.match(/.{1,255}/g) ?? [];
}

async function resolver(name: string, type: string): Promise<string[][]> {
  if (type !== "TXT") throw Object.assign(new Error(`no ${type} for ${name}`), { code: "ENOTFOUND" });
  if (name === `rsa1._domainkey.${domain}`) return [txtChunks(dkimTxtValue(rsa.publicKeyB64))];
  if (name === `ed1._domainkey.${domain}`) return [txtChunks(dkimTxtValue(ed25519.publicKeyB64, "ed25519"))];
  throw Object.assign(new Error(`no record for ${name}`), { code: "ENOTFOUND" });
}

function baseMessage(overrides: Partial<MimeMessageInput> = {}): MimeMessageInput {
  return {
    from: { name: "Acme News", address: `news@${domain}` },
    to: ["ann@example.org"],
    subject: "Your weekly report",
    text: "Hello Ann,\n\nhere is your report.\n",
    messageId: buildMessageId("msg_test", `news@${domain}`),
    date: new Date("2025-01-02T03:04:05Z"),
    ...overrides,
  };
}

async function signRsa(raw: string): Promise<string> {
  return (await signDkim(raw, { domain, selector: "rsa1", privateKey: rsaKey })) + raw;
}

async function verify(signed: string) {
  const result = await dkimVerify(signed, { resolver });
  return result.results.map((r) => ({ result: r.status.result, comment: r.status.comment, domain: r.signingDomain }));
}

beforeAll(async () => {
  [rsa, ed25519] = await Promise.all([generateDkimKeyPair(), generateDkimEd25519KeyPair()]);
  [rsaKey, edKey] = await Promise.all([importDkimPrivateKey(rsa.privateKeyPkcs8B64), importDkimPrivateKey(ed25519.privateKeyPkcs8B64)]);
});

describe("DKIM signatures verified by mailauth", () => {
  it("passes for a plain text message", async () => {
    const results = await verify(await signRsa(buildMimeMessage(baseMessage())));
    expect(results).toEqual([{ result: "pass", comment: undefined, domain }]);
  });

  it("passes for multipart/alternative with an attachment and List-Unsubscribe headers", async () => {
    const raw = buildMimeMessage(
      baseMessage({
        html: "<p>Hello <b>Ann</b></p>",
        replyTo: { name: "Support", address: `support@${domain}` },
        cc: ["bob@example.org"],
        attachments: [{ filename: "report.csv", contentType: "text/csv", contentBase64: btoa("a,b\n1,2\n".repeat(100)) }],
        headers: {
          "List-Unsubscribe": `<https://mail.${domain}/u/${"t".repeat(40)}>, <mailto:unsubscribe@${domain}>`,
          "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        },
      }),
    );
    const signed = await signRsa(raw);
    const signatureHeader = signed.slice(0, signed.indexOf("\r\n", signed.indexOf(" b=")) + 2);
    expect(signatureHeader.replace(/\r\n /g, "")).toContain(
      "h=from:to:cc:subject:date:message-id:reply-to:mime-version:content-type:list-unsubscribe:list-unsubscribe-post;",
    );
    expect(signatureHeader.split("\r\n").every((line) => line.length < 78)).toBe(true);
    expect((await verify(signed))[0]?.result).toBe("pass");
  });

  it("passes for a UTF-8 subject and display names", async () => {
    const raw = buildMimeMessage(
      baseMessage({ subject: "Grüße aus Zürich — 你好 🎉 ".repeat(4), from: { name: "Zoë Ångström", address: `news@${domain}` } }),
    );
    expect((await verify(await signRsa(raw)))[0]?.result).toBe("pass");
  });

  it("passes with a long folded header and odd whitespace in headers", async () => {
    const raw = buildMimeMessage(baseMessage({ headers: { "X-Long": "word ".repeat(60).trim(), "X-Spaced": "a \t  b" } }));
    const withRawHeader = raw.replace("Subject: Your weekly report", "Subject:   Your\t weekly   \r\n\treport  ");
    const signed = await signDkim(withRawHeader, {
      domain,
      selector: "rsa1",
      privateKey: rsaKey,
      headerFieldNames: ["from", "subject", "x-long", "x-spaced"],
    });
    expect(signed.split("\r\n").every((line) => line.length < 78)).toBe(true);
    expect((await verify(signed + withRawHeader))[0]?.result).toBe("pass");
  });

  it("passes for a body with trailing blank lines and whitespace, and for an empty body", async () => {
    const head = `From: news@${domain}\r\nTo: ann@example.org\r\nSubject: ws\r\n\r\n`;
    for (const body of ["line one   \r\n\tindented\t \r\n\r\n\r\n  \r\n\r\n", "", "no final newline", "lf only\n\n"]) {
      expect((await verify(await signRsa(head + body)))[0]?.result, JSON.stringify(body)).toBe("pass");
    }
  });

  it("accepts the PKCS#8 string directly and bytes as input", async () => {
    const raw = buildMimeMessage(baseMessage());
    const header = await signDkim(new TextEncoder().encode(raw), { domain, selector: "rsa1", privateKeyPkcs8B64: rsa.privateKeyPkcs8B64 });
    expect((await verify(header + raw))[0]?.result).toBe("pass");
  });

  it("passes for raw 8-bit bytes that are not UTF-8, signed as bytes", async () => {
    // ISO-8859-1 "Grüße" in a header and the body, as a relayed SMTP message may carry it.
    const raw = Buffer.concat([
      Buffer.from(`From: news@${domain}\r\nTo: ann@example.org\r\nSubject: Gr`),
      Buffer.from([0xfc, 0xdf, 0x65]),
      Buffer.from("\r\nContent-Type: text/plain; charset=iso-8859-1\r\n\r\nGr"),
      Buffer.from([0xfc, 0xdf, 0x65, 0xa0, 0x20, 0x20]),
      Buffer.from("\r\n\r\n"),
    ]);
    const header = await signDkim(new Uint8Array(raw), { domain, selector: "rsa1", privateKey: rsaKey });
    const result = await dkimVerify(Buffer.concat([Buffer.from(header), raw]), { resolver });
    expect(result.results[0]?.status.result).toBe("pass");
  });

  it("passes with an Ed25519 signature next to the RSA one", async () => {
    const raw = buildMimeMessage(baseMessage({ html: "<p>two signatures</p>" }));
    const edHeader = await signDkim(raw, { domain, selector: "ed1", privateKey: edKey });
    expect(edHeader).toContain("a=ed25519-sha256;");
    const results = await verify(edHeader + (await signRsa(raw)));
    expect(results.map((r) => r.result)).toEqual(["pass", "pass"]);
  });

  it("fails when the body is changed after signing", async () => {
    const signed = await signRsa(buildMimeMessage(baseMessage()));
    const results = await verify(signed.replace("here is your report", "here is your invoice"));
    expect(results[0]?.result).toBe("neutral");
    expect(results[0]?.comment).toMatch(/body hash did not verify/);
  });

  it("fails when a signed header is changed after signing", async () => {
    const signed = await signRsa(buildMimeMessage(baseMessage()));
    const results = await verify(signed.replace("Subject: Your weekly report", "Subject: Your weekly invoice"));
    expect(results[0]?.result).toBe("fail");
  });
});
