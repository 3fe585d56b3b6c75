import { databaseTag, openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { purgeExpiredData } from "../../src/domain/retention/purge";
import { signIn } from "../support/dashboard";
import { createdIn, lastAccountDatabase, otherAccountDatabase } from "../support/databases";
import { call, createAccount, createKey, d1Of, json } from "../support/helpers";
import { verifiedDomain } from "../support/sending";
import { addReceiverRule, createEndpoint, receiverPath, receiverUrl, specVerify, waitForRequests } from "../support/webhooks";
import { deliver, inboundList, inboundMail, inboundObjects, receivingDomain } from "../support/inbound";

type Inbound = {
  id: string;
  envelope_to: string;
  envelope_from: string;
  from: string | null;
  to: string[];
  cc: string[];
  subject: string | null;
  date: string | null;
  message_id: string | null;
  in_reply_to: string | null;
  references: string[];
  text: string | null;
  html: string | null;
  size: number;
  attachment_count: number;
  attachments: {
    index: number;
    filename: string | null;
    content_type: string;
    size: number;
    content_id: string | null;
    disposition: string | null;
  }[];
  authentication: { spf: string | null; dkim: string | null; dmarc: string | null; header: string | null; received_spf: string | null };
  auto_submitted: string | null;
  in_reply_to_message_id: string | null;
  campaign_id: string | null;
};

const inboundOf = async (key: string, id: string) => {
  const response = await call(`/api/v1/inbound/${id}`, { key });
  expect(response.status).toBe(200);
  return json<Inbound>(response);
};

async function receiver() {
  const account = await createAccount();
  const key = account.api_key;
  return { account, key, domain: await receivingDomain(key) };
}

describe("receiving a domain's mail", () => {
  it("PATCH /domains/{id} turns receiving on: the domain's Email Routing MX joins its records and is checked on verify", async () => {
    const { api_key: key } = await createAccount();
    const verified = await verifiedDomain(key);
    const unpublishedMx = await call(`/api/v1/domains/${verified.id}`, {
      key,
      method: "PATCH",
      body: { receiving: true, receiving_addresses: ["Support", `billing@${verified.name}`] },
    });
    expect(unpublishedMx.status).toBe(200);
    const turnedOn = await json<{
      receiving: boolean;
      receiving_addresses: string[];
      records: { type: string; name: string; purpose: string; status: string }[];
    }>(unpublishedMx);
    expect(turnedOn.receiving).toBe(true);
    expect(turnedOn.receiving_addresses).toEqual(["support", "billing"]);
    expect(turnedOn.records).toContainEqual(
      expect.objectContaining({ type: "MX", name: verified.name, value: "route1.mx.cloudflare.net", purpose: "inbound", status: "pending" }),
    );
    // The other records keep what the last check found.
    expect(turnedOn.records.filter((record) => record.purpose === "dkim")).toEqual([expect.objectContaining({ status: "verified" })]);

    const checked = await json<{ status: string; records: { purpose: string; status: string }[] }>(
      await call(`/api/v1/domains/${verified.id}/verify`, { key, method: "POST" }),
    );
    expect(checked.status).toBe("verified");
    expect(checked.records.find((record) => record.purpose === "inbound")?.status).toBe("not_found");

    const off = await json<{ receiving: boolean; records: { purpose: string }[] }>(
      await call(`/api/v1/domains/${verified.id}`, { key, method: "PATCH", body: { receiving: false } }),
    );
    expect(off.receiving).toBe(false);
    expect(off.records.map((record) => record.purpose)).not.toContain("inbound");
  });

  it("refuses receiving on a domain that is not verified, bad addresses, and a name another account receives", async () => {
    const { api_key: key } = await createAccount();
    const pending = await json<{ id: string; name: string }>(
      await call("/api/v1/domains", { key, body: { name: `pending-${crypto.randomUUID().slice(0, 8)}.send-test` } }),
    );
    const notVerified = await call(`/api/v1/domains/${pending.id}`, { key, method: "PATCH", body: { receiving: true } });
    expect(notVerified.status).toBe(403);
    expect(await json(notVerified)).toMatchObject({ code: "domain_not_verified" });

    const { domain } = await receiver();
    const other = await createAccount();
    const sameName = await verifiedDomain(other.api_key, domain.name);
    const taken = await call(`/api/v1/domains/${sameName.id}`, { key: other.api_key, method: "PATCH", body: { receiving: true } });
    expect(taken.status).toBe(409);

    const verified = await verifiedDomain(key);
    const bad = await call(`/api/v1/domains/${verified.id}`, {
      key,
      method: "PATCH",
      body: { receiving: true, receiving_addresses: ["ok", "a b", `x@elsewhere.example`] },
    });
    expect(bad.status).toBe(422);
    expect(await json(bad)).toMatchObject({
      errors: { "receiving_addresses.1": [expect.any(String)], "receiving_addresses.2": [expect.any(String)] },
    });
    const unknownField = await call(`/api/v1/domains/${verified.id}`, { key, method: "PATCH", body: { receiving: true, catch_all: true } });
    expect(unknownField.status).toBe(422);
  });
});

describe("mail to a receiving domain", () => {
  it("is stored, listed and readable; its attachment downloads; email.received reaches a signed webhook with download links", async () => {
    const { key, domain } = await receiver();
    const hook = receiverPath();
    await addReceiverRule({ path: hook, status: 200 });
    const endpoint = await createEndpoint(key, { url: receiverUrl(hook), events: ["email.received"] });
    const to = `support@${domain.name}`;
    const raw = inboundMail("replyWithAttachments", { to });

    expect(await deliver(to, raw)).toEqual({ rejected: undefined });

    const [listed, ...others] = await inboundList(key);
    expect(others).toEqual([]);
    expect(listed).toMatchObject({ envelope_to: to, subject: "Re: Your receipt", in_reply_to_message_id: null });
    const message = await inboundOf(key, listed!.id);
    expect(message).toMatchObject({
      envelope_from: "jane@example.org",
      from: "Jane Doe <jane@example.org>",
      to: [`Acme Support <${to}>`],
      cc: ["Ops, Team <ops@example.org>", "bob@example.net"],
      subject: "Re: Your receipt",
      date: "2026-11-24T17:12:30.000Z",
      message_id: expect.stringMatching(/^<CAJane.+@mail\.gmail\.com>$/),
      in_reply_to: "<CAOther0002@mail.gmail.com>",
      references: ["<CAFirstThread0001@mail.gmail.com>", "<CAOther0002@mail.gmail.com>"],
      size: new TextEncoder().encode(raw).byteLength,
      attachment_count: 2,
      auto_submitted: null,
    });
    expect(message.text).toContain("Thanks, the invoice is attached. ✅");
    expect(message.html).toContain('<img src="cid:logo@example.org"');
    expect(message.attachments).toEqual([
      { index: 0, filename: "logo.png", content_type: "image/png", size: 70, content_id: "<logo@example.org>", disposition: "inline" },
      { index: 1, filename: "invoice-2026-11.pdf", content_type: "application/pdf", size: 142, content_id: null, disposition: "attachment" },
    ]);
    // The results Email Routing wrote on top, not the forged ones the message carried below them.
    expect(message.authentication).toMatchObject({ spf: "pass", dkim: "pass", dmarc: "pass", header: expect.stringContaining("mx.cloudflare.net") });
    expect(message.authentication.received_spf).toMatch(/^pass /);

    const raw200 = await call(`/api/v1/inbound/${message.id}/raw`, { key });
    expect(raw200.status).toBe(200);
    expect(raw200.headers.get("Content-Type")).toBe("message/rfc822");
    expect(new TextDecoder().decode(await raw200.arrayBuffer())).toBe(raw);

    const pdf = await call(`/api/v1/inbound/${message.id}/attachments/1`, { key });
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get("Content-Type")).toBe("application/pdf");
    expect(pdf.headers.get("Content-Disposition")).toBe('attachment; filename="invoice-2026-11.pdf"');
    const pdfBytes = new Uint8Array(await pdf.arrayBuffer());
    expect(pdfBytes.byteLength).toBe(142);
    expect(new TextDecoder().decode(pdfBytes)).toMatch(/^%PDF-1\.4\n[\s\S]*%%EOF\n$/);
    expect((await call(`/api/v1/inbound/${message.id}/attachments/2`, { key })).status).toBe(404);

    const [delivery] = await waitForRequests(hook, 1);
    const header = delivery!.headers["x-service-signature"]!;
    expect(await specVerify(endpoint.secret, header, delivery!.body, Math.floor(Date.now() / 1000))).toBe(true);
    const event = JSON.parse(delivery!.body) as { type: string; data: Record<string, unknown> & { attachments: { download_url: string }[] } };
    expect(event.type).toBe("email.received");
    expect(event.data).toMatchObject({
      inbound_id: message.id,
      envelope_to: to,
      from: "Jane Doe <jane@example.org>",
      subject: "Re: Your receipt",
      text_excerpt: expect.stringContaining("Thanks, the invoice is attached. ✅"),
      authentication: { spf: "pass", dkim: "pass", dmarc: "pass" },
      attachments: [
        expect.objectContaining({ index: 0, filename: "logo.png", size: 70 }),
        expect.objectContaining({ index: 1, filename: "invoice-2026-11.pdf", content_type: "application/pdf", size: 142 }),
      ],
    });
    // Small: metadata and links, never the bytes.
    expect(delivery!.body).not.toContain("JVBERi0xLjQ");
    expect(event.data).not.toHaveProperty("html");

    // The link works without a key; altered, it does not.
    const link = new URL(event.data.attachments[1]!.download_url);
    const downloaded = await call(`${link.pathname}${link.search}`);
    expect(downloaded.status).toBe(200);
    expect(new Uint8Array(await downloaded.arrayBuffer())).toEqual(pdfBytes);
    const otherFile = await call(`${link.pathname.replace(/\/1$/, "/0")}${link.search}`);
    expect(otherFile.status).toBe(404);
    const extended = new URL(link);
    extended.searchParams.set("expires", String(Number(link.searchParams.get("expires")) + 86_400));
    expect((await call(`${extended.pathname}${extended.search}`)).status).toBe(404);
  });

  it("a redelivered message is stored once and announced once", async () => {
    const { account, key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const raw = inboundMail("replyWithAttachments", { to });
    await deliver(to, raw);
    await deliver(to, raw);
    const listed = await inboundList(key);
    expect(listed).toHaveLength(1);
    const { total } = (await d1Of(account)
      .prepare("SELECT count(*) AS total FROM events WHERE subject_id = ?")
      .bind(listed[0]!.id)
      .first<{ total: number }>())!;
    expect(total).toBe(1);
  });

  it("a redelivery that gained trace headers on the way is still the same mail; another mail reusing its Message-ID is kept", async () => {
    const { account, key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const raw = inboundMail("replyWithAttachments", { to });
    await deliver(to, raw);
    // Email Routing retrying adds its own trace on top; the mail under it is the same.
    await deliver(to, `Received: from mx2.cloudflare.net by route2 with ESMTPS; Tue, 24 Nov 2026 18:13:00 +0100\r\n${raw}`);
    expect(await inboundList(key)).toHaveLength(1);

    // Same Message-ID, other words: a second mail, not a redelivery.
    const other = raw.replace("Subject: Re: Your receipt", "Subject: Something else entirely");
    expect(other).not.toBe(raw);
    expect(await deliver(to, other)).toEqual({ rejected: undefined });
    const listed = await inboundList(key);
    expect(listed.map((row) => row.subject).sort()).toEqual(["Re: Your receipt", "Something else entirely"]);
    const { total } = (await d1Of(account)
      .prepare("SELECT count(*) AS total FROM events WHERE type = 'email.received' AND subject_id IN (?, ?)")
      .bind(listed[0]!.id, listed[1]!.id)
      .first<{ total: number }>())!;
    expect(total).toBe(2);
  });

  it("filters the list by address and date, pages with a cursor, and deletes a message with its stored bytes", async () => {
    const { key, domain } = await receiver();
    const support = `support@${domain.name}`;
    const sales = `sales@${domain.name}`;
    for (const to of [support, sales, support]) expect((await deliver(to, inboundMail("autoReply", { to }))).rejected).toBeUndefined();

    expect((await inboundList(key, `?to=${encodeURIComponent(support.toUpperCase())}`)).map((row) => row.envelope_to)).toEqual([support, support]);
    expect(await inboundList(key, "?from=ooo@example.org")).toHaveLength(3);
    expect(await inboundList(key, "?from=nobody@example.org")).toHaveLength(0);
    const today = new Date().toISOString().slice(0, 10);
    expect(await inboundList(key, `?received_after=${today}&received_before=${today}`)).toHaveLength(3);
    expect(await inboundList(key, "?received_before=2020-01-01")).toHaveLength(0);
    expect((await call("/api/v1/inbound?received_after=yesterday", { key })).status).toBe(422);

    const first = await json<{ data: { id: string }[]; has_more: boolean; next_cursor: string }>(await call("/api/v1/inbound?limit=2", { key }));
    expect(first.has_more).toBe(true);
    const second = await json<{ data: { id: string }[]; has_more: boolean }>(
      await call(`/api/v1/inbound?limit=2&cursor=${first.next_cursor}`, { key }),
    );
    expect(second).toMatchObject({ has_more: false });
    expect(new Set([...first.data, ...second.data].map((row) => row.id)).size).toBe(3);

    const doomed = first.data[0]!.id;
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${doomed}/`))).toEqual([`inbound/${doomed}/raw.eml`]);
    const deleted = await call(`/api/v1/inbound/${doomed}`, { key, method: "DELETE" });
    expect(deleted.status).toBe(200);
    expect(await json(deleted)).toEqual({ id: doomed, deleted: true });
    expect((await call(`/api/v1/inbound/${doomed}`, { key })).status).toBe(404);
    expect((await call(`/api/v1/inbound/${doomed}/raw`, { key })).status).toBe(404);
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${doomed}/`))).toEqual([]);
    expect((await call(`/api/v1/inbound/${doomed}`, { key, method: "DELETE" })).status).toBe(404);
  });

  it("is the account's alone, and needs the inbound scope", async () => {
    const { key, domain } = await receiver();
    const to = `support@${domain.name}`;
    await deliver(to, inboundMail("autoReply", { to }));
    const [stored] = await inboundList(key);

    const stranger = await createAccount();
    expect((await call(`/api/v1/inbound/${stored!.id}`, { key: stranger.api_key })).status).toBe(404);
    expect((await call(`/api/v1/inbound/${stored!.id}/raw`, { key: stranger.api_key })).status).toBe(404);
    expect(await inboundList(stranger.api_key)).toEqual([]);

    const sendOnly = await createKey(key, { name: "sender", scopes: ["send"] });
    const refused = await call("/api/v1/inbound", { key: sendOnly.key });
    expect(refused.status).toBe(403);
    const reader = await createKey(key, { name: "inbox", scopes: ["inbound"] });
    expect((await call(`/api/v1/inbound/${stored!.id}`, { key: reader.key })).status).toBe(200);
  });
});

describe("mail that is refused at SMTP time", () => {
  it("mail to a domain that is not receiving is refused and nothing is stored", async () => {
    const { key } = await receiver();
    const sending = await verifiedDomain(key);
    const objectsBefore = await inboundObjects();

    for (const to of [`support@${sending.name}`, "someone@unknown-domain.example", "no-at-sign"]) {
      const outcome = await deliver(to, inboundMail("replyWithAttachments", { to }));
      expect(outcome.rejected).toMatch(/^5\.1\.2 .*does not receive mail/);
    }
    expect(await inboundList(key)).toEqual([]);
    expect(await inboundObjects()).toEqual(objectsBefore);
  });

  it("an address off the domain's list is refused; one on it (or its +tag) is taken", async () => {
    const { api_key: key } = await createAccount();
    const domain = await receivingDomain(key, { receiving_addresses: ["support"] });
    const refused = await deliver(`sales@${domain.name}`, inboundMail("autoReply", { to: `sales@${domain.name}` }));
    expect(refused.rejected).toBe(`5.1.1 <sales@${domain.name}>: no such mailbox`);
    for (const to of [`Support@${domain.name}`, `support+ticket-42@${domain.name}`]) {
      expect(await deliver(to, inboundMail("autoReply", { to }))).toEqual({ rejected: undefined });
    }
    expect((await inboundList(key)).map((row) => row.envelope_to).sort()).toEqual([`support+ticket-42@${domain.name}`, `support@${domain.name}`]);
  });

  it("oversized mail is refused before it is read, and so is mail with too many attachments", async () => {
    const { key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const objectsBefore = await inboundObjects();
    // Email Routing states the size in rawSize: a message over 25 MiB is refused without reading its stream.
    const oversized = await deliver(to, inboundMail("autoReply", { to }), { rawSize: 25 * 1024 * 1024 + 1 });
    expect(oversized.rejected).toBe("5.3.4 Message too big: 26214401 bytes, the limit is 26214400");

    // A stream longer than its announced size is measured too.
    const body = "A".repeat(76);
    const big = `${inboundMail("autoReply", { to }).replace("I am away until Monday.", "")}${`${body}\r\n`.repeat(Math.ceil((25 * 1024 * 1024) / 78) + 10)}`;
    const streamed = await deliver(to, big, { rawSize: 1000 });
    expect(streamed.rejected).toMatch(/^5\.3\.4 Message too big: \d+ bytes, the limit is 26214400$/);

    const parts = Array.from(
      { length: 101 },
      (_, i) => `--many\r\nContent-Type: text/plain; name="f${i}.txt"\r\nContent-Disposition: attachment; filename="f${i}.txt"\r\n\r\nfile ${i}\r\n`,
    ).join("");
    const many = `From: a@example.org\r\nTo: ${to}\r\nSubject: many\r\nMessage-ID: <many-${crypto.randomUUID()}@example.org>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="many"\r\n\r\n--many\r\nContent-Type: text/plain\r\n\r\nhi\r\n${parts}--many--\r\n`;
    expect((await deliver(to, many)).rejected).toBe("5.3.4 Too many attachments: 101, the limit is 100");

    expect(await inboundList(key)).toEqual([]);
    expect(await inboundObjects()).toEqual(objectsBefore);
  });

  it("past the domain's hourly cap, mail is refused with a temporary error and not stored", async () => {
    const { key, domain } = await receiver();
    const capped = { ...env, INBOUND_MAX_PER_HOUR: "2" } as Env;
    const to = `support@${domain.name}`;
    for (let i = 0; i < 2; i++) expect(await deliver(to, inboundMail("autoReply", { to }), { env: capped })).toEqual({ rejected: undefined });
    const third = await deliver(to, inboundMail("autoReply", { to }), { env: capped });
    expect(third.rejected).toBeUndefined();
    expect(third.failed?.message).toBe(`4.7.1 ${domain.name} has received its 2 messages this hour; try again later`);
    expect(await inboundList(key)).toHaveLength(2);
    // Another receiving domain has a cap of its own.
    const { domain: otherDomain } = await receiver();
    expect(await deliver(`a@${otherDomain.name}`, inboundMail("autoReply", { to: `a@${otherDomain.name}` }), { env: capped })).toEqual({
      rejected: undefined,
    });
  });

  it("mail that passed the cap's first check but lost the race for the last places is refused and leaves nothing in R2", async () => {
    const { key, domain } = await receiver();
    // The bucket as the Worker uses it, counting the deletions: the cleanup of mail that lost the race.
    let deletions = 0;
    const blobs = new Proxy(env.BLOBS, {
      get(target, property) {
        if (property === "delete") deletions += 1;
        const value = Reflect.get(target, property);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    const capped = { ...env, INBOUND_MAX_PER_HOUR: "2", BLOBS: blobs } as Env;
    const to = `support@${domain.name}`;
    const objectsBefore = await inboundObjects();
    // Delivered at once, the four count the domain's hour before any is stored: each writes R2, then the guarded
    // insert lets two in.
    const deliveries = await Promise.all(Array.from({ length: 4 }, () => deliver(to, inboundMail("autoReply", { to }), { env: capped })));
    expect(deliveries.filter((delivery) => !delivery.failed && !delivery.rejected)).toHaveLength(2);
    expect(deliveries.map((delivery) => delivery.failed?.message).filter(Boolean)).toEqual([
      `4.7.1 ${domain.name} has received its 2 messages this hour; try again later`,
      `4.7.1 ${domain.name} has received its 2 messages this hour; try again later`,
    ]);
    const stored = (await inboundList(key)).map((mail) => mail.id);
    expect(stored).toHaveLength(2);
    const added = (await inboundObjects()).filter((object) => !objectsBefore.includes(object));
    expect(new Set(added.map((object) => object.split("/")[1]))).toEqual(new Set(stored));
    // The race did happen (a delivery refused by the first check writes nothing to clean up).
    expect(deletions).toBeGreaterThan(0);
  });
});

describe("real-format mail", () => {
  it("decodes non-UTF-8 charsets: ISO-8859-1, windows-1252, ISO-2022-JP and RFC 2047 words", async () => {
    const { key, domain } = await receiver();
    const to = `support@${domain.name}`;
    expect(await deliver(to, inboundMail("charsets", { to }))).toEqual({ rejected: undefined });
    const [listed] = await inboundList(key);
    const message = await inboundOf(key, listed!.id);
    expect(message.from).toBe("Renée Lefèvre <renee@example.fr>");
    expect(message.subject).toBe("Café crème € 12");
    expect(message.text?.trim()).toBe("Café crème à 3 €");
    expect(message.html).toContain("<p>Prix: 12 € — réduit</p>");
    expect(message.attachments).toEqual([expect.objectContaining({ filename: "挨拶.txt", content_type: "text/plain" })]);
  });

  it("takes 8-bit ISO-8859-1 bytes as they come, without a transfer encoding", async () => {
    const { key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const head = `From: a@example.org\r\nTo: ${to}\r\nSubject: latin\r\nMessage-ID: <latin-${crypto.randomUUID()}@example.org>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: 8bit\r\n\r\n`;
    const bytes = new Uint8Array([...new TextEncoder().encode(head), 0x47, 0x72, 0xfc, 0xdf, 0x65, 0x0d, 0x0a]);
    expect(await deliver(to, bytes)).toEqual({ rejected: undefined });
    const [listed] = await inboundList(key);
    expect((await inboundOf(key, listed!.id)).text?.trim()).toBe("Grüße");
    expect(new Uint8Array(await (await call(`/api/v1/inbound/${listed!.id}/raw`, { key })).arrayBuffer())).toEqual(bytes);
  });

  it("stores a message with a huge header block, bounding the fields a row keeps", async () => {
    const { key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const received = Array.from(
      { length: 4000 },
      (_, i) =>
        `Received: from relay${i}.example.net (relay${i}.example.net [192.0.2.${i % 250}]) by mx.example.net; Tue, 24 Nov 2026 09:00:00 +0000\r\n`,
    ).join("");
    const references = Array.from({ length: 500 }, (_, i) => `<ref${i}@example.net>`).join("\r\n ");
    const subject = "S".repeat(10_000);
    const raw = `${received}From: a@example.org\r\nTo: ${to}\r\nSubject: ${subject}\r\nReferences: ${references}\r\nMessage-ID: <huge-${crypto.randomUUID()}@example.org>\r\n\r\nbody\r\n`;
    expect(raw.length).toBeGreaterThan(500_000);
    expect(await deliver(to, raw)).toEqual({ rejected: undefined });
    const [listed] = await inboundList(key);
    const message = await inboundOf(key, listed!.id);
    expect(message.subject).toHaveLength(2000);
    expect(message.references).toHaveLength(100);
    expect(message.references[0]).toBe("<ref0@example.net>");
    expect(message.references.at(-1)).toBe("<ref499@example.net>");
    expect(message.size).toBe(raw.length);
    expect(new TextDecoder().decode(await (await call(`/api/v1/inbound/${message.id}/raw`, { key })).arrayBuffer())).toBe(raw);
  });

  it("refuses headers past postal-mime's 2 MiB limit as unreadable", async () => {
    const { key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const raw = `${`X-Filler: ${"x".repeat(990)}\r\n`.repeat(2200)}From: a@example.org\r\nTo: ${to}\r\nSubject: too much\r\n\r\nbody\r\n`;
    expect((await deliver(to, raw)).rejected).toBe("5.6.0 The message could not be read as MIME");
    expect(await inboundList(key)).toEqual([]);
  });

  it("keeps malformed MIME: a stray header line, an unclosed boundary, broken base64, an unknown charset", async () => {
    const { key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const raw = inboundMail("malformed", { to });
    expect(await deliver(to, raw)).toEqual({ rejected: undefined });
    const [listed] = await inboundList(key);
    const message = await inboundOf(key, listed!.id);
    expect(message.subject).toBe("Malformed");
    expect(message.text).toContain("Body survives even though the charset is unknown.");
    expect(message.attachments).toEqual([expect.objectContaining({ index: 0, filename: "broken.bin", content_type: "application/octet-stream" })]);
    expect((await call(`/api/v1/inbound/${message.id}/attachments/0`, { key })).status).toBe(200);
    expect(new TextDecoder().decode(await (await call(`/api/v1/inbound/${message.id}/raw`, { key })).arrayBuffer())).toBe(raw);
  });

  it("keeps a large body in R2 rather than the row, and still shows it", async () => {
    const { account, key, domain } = await receiver();
    const to = `support@${domain.name}`;
    const text = `${"word ".repeat(40_000)}end`;
    const raw = `From: a@example.org\r\nTo: ${to}\r\nSubject: long\r\nMessage-ID: <long-${crypto.randomUUID()}@example.org>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n${text}\r\n`;
    expect(await deliver(to, raw)).toEqual({ rejected: undefined });
    const [listed] = await inboundList(key);
    expect((await inboundOf(key, listed!.id)).text?.trim()).toBe(text);
    const row = await d1Of(account)
      .prepare("SELECT text, body_key FROM inbound_emails WHERE id = ?")
      .bind(listed!.id)
      .first<{ text: string | null; body_key: string }>();
    expect(row).toEqual({ text: null, body_key: `inbound/${listed!.id}/body.json` });
  });
});

describe("mail for an account in another account database", () => {
  it("is stored in the account's database, found there by the API, and its attachment links name that database", async () => {
    const account = await createdIn(lastAccountDatabase(), () => createAccount());
    const key = account.api_key;
    const domain = await receivingDomain(key);
    const to = `support@${domain.name}`;
    expect(await deliver(to, inboundMail("replyWithAttachments", { to }))).toEqual({ rejected: undefined });
    const [stored] = await inboundList(key);
    expect(stored).toMatchObject({ envelope_to: to, subject: "Re: Your receipt" });
    const own = d1Of(account);
    expect(await own.prepare("SELECT envelope_to FROM inbound_emails WHERE id = ?").bind(stored!.id).first()).toEqual({ envelope_to: to });
    expect(await env.DB.prepare("SELECT count(*) AS n FROM inbound_emails WHERE id = ?").bind(stored!.id).first()).toEqual({ n: 0 });

    const event = await own
      .prepare("SELECT data FROM events WHERE type = 'email.received' AND subject_id = ?")
      .bind(stored!.id)
      .first<{ data: string }>();
    const link = new URL((JSON.parse(event!.data) as { attachments: { download_url: string }[] }).attachments[1]!.download_url);
    expect(link.searchParams.get("db")).toBe(databaseTag(account.database));
    // A link made before account databases has no `db`, and one made before a move names another: all three download
    // the same file.
    const untagged = new URL(link);
    untagged.searchParams.delete("db");
    const stale = new URL(link);
    const staleTag = databaseTag(otherAccountDatabase(account.database));
    expect(staleTag).not.toBe("");
    stale.searchParams.set("db", staleTag);
    const files: { status: number; type: string | null; bytes: Uint8Array }[] = [];
    for (const url of [link, untagged, stale]) {
      const response = await call(`${url.pathname}${url.search}`);
      files.push({ status: response.status, type: response.headers.get("Content-Type"), bytes: new Uint8Array(await response.arrayBuffer()) });
    }
    expect(files[0]).toMatchObject({ status: 200, type: "application/pdf" });
    expect(new TextDecoder().decode(files[0]!.bytes)).toMatch(/^%PDF-1\.4\n[\s\S]*%%EOF\n$/);
    expect(files.slice(1)).toEqual([files[0], files[0]]);
  });
});

describe("mail to the bounce domain", () => {
  it("still goes to the feedback intake, which drops what is not a report without storing it as received mail", async () => {
    const { key } = await receiver();
    const to = "fbl@bounces.mailforge.test";
    expect(await deliver(to, inboundMail("autoReply", { to }))).toEqual({ rejected: undefined });
    expect(await inboundList(key)).toEqual([]);
    const big = await deliver(to, inboundMail("autoReply", { to }), { rawSize: 6 * 1024 * 1024 });
    expect(big.rejected).toBe("Message too large for a delivery report");
  });
});

const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();

describe("retention of received mail", () => {
  it("purges received mail older than RETENTION_DAYS with its raw bytes and attachments, and keeps younger mail", async () => {
    const account = await createAccount();
    const key = account.api_key;
    const domain = await receivingDomain(key);
    const to = `support@${domain.name}`;
    await deliver(to, inboundMail("replyWithAttachments", { to }));
    const [old] = await inboundList(key);
    await deliver(to, inboundMail("replyWithAttachments", { to }));
    const young = (await inboundList(key)).find((row) => row.id !== old!.id)!;
    // Received 31 days ago (RETENTION_DAYS is 30 by default).
    await d1Of(account).prepare("UPDATE inbound_emails SET created_at = ? WHERE id = ?").bind(daysAgo(31), old!.id).run();
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${old!.id}/`))).toHaveLength(3);

    expect(await purgeExpiredData(openCtx(env, undefined, account))).toMatchObject({ inboundEmails: 1 });

    expect((await call(`/api/v1/inbound/${old!.id}`, { key })).status).toBe(404);
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${old!.id}/`))).toEqual([]);
    expect((await inboundList(key)).map((row) => row.id)).toEqual([young.id]);
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${young.id}/`))).toHaveLength(3);
    expect((await call(`/api/v1/inbound/${young.id}/attachments/1`, { key })).status).toBe(200);
  });
});

describe("the dashboard's Inbound page", () => {
  it("lists received mail and shows one with its HTML in a sandboxed frame under its own CSP, and its attachments", async () => {
    const { api_key: key } = await createAccount();
    const domain = await receivingDomain(key);
    const to = `support@${domain.name}`;
    await deliver(to, inboundMail("replyWithAttachments", { to }));
    const [stored] = await inboundList(key);
    const browser = await signIn(key);

    const list = await browser.get("/dashboard/inbound");
    expect(list.status).toBe(200);
    const listHtml = await list.text();
    expect(listHtml).toContain('<a href="/dashboard/inbound" aria-current="page">Inbound</a>');
    expect(listHtml).toContain(`<a href="/dashboard/inbound/${stored!.id}">Re: Your receipt</a>`);

    const detail = await (await browser.get(`/dashboard/inbound/${stored!.id}`)).text();
    expect(detail).toContain(`<iframe class="preview" title="HTML body" sandbox="" src="/dashboard/inbound/${stored!.id}/html"></iframe>`);
    // The HTML body never reaches the page itself: only the frame's own response carries it.
    expect(detail).not.toContain("<script>alert(1)</script>");
    expect(detail).toContain("invoice-2026-11.pdf");
    expect(detail).toContain("Thanks, the invoice is attached.");

    const frame = await browser.get(`/dashboard/inbound/${stored!.id}/html`);
    expect(frame.headers.get("Content-Security-Policy")).toBe(
      "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'; font-src data:; frame-ancestors 'self'; base-uri 'none'",
    );
    expect(await frame.text()).toContain("<script>alert(1)</script>");

    const pdf = await browser.get(`/dashboard/inbound/${stored!.id}/attachments/1`);
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get("Content-Disposition")).toBe('attachment; filename="invoice-2026-11.pdf"');
    expect((await pdf.arrayBuffer()).byteLength).toBe(142);
  });

  it("turns receiving on for a domain, and deletes a message", async () => {
    const { api_key: key } = await createAccount();
    const domain = await verifiedDomain(key);
    const browser = await signIn(key);
    const saved = await browser.post(`/dashboard/inbound/domains/${domain.id}`, { receiving: "on", addresses: "support, replies" });
    expect(saved.status).toBe(303);
    const to = `replies@${domain.name}`;
    expect(await deliver(to, inboundMail("autoReply", { to }))).toEqual({ rejected: undefined });
    expect((await deliver(`other@${domain.name}`, inboundMail("autoReply", { to }))).rejected).toMatch(/^5\.1\.1/);

    const [stored] = await inboundList(key);
    const deleted = await browser.post(`/dashboard/inbound/${stored!.id}/delete`, {});
    expect(deleted.status).toBe(303);
    expect(await inboundList(key)).toEqual([]);
  });

  it("is not shown to a key without the inbound scope", async () => {
    const { api_key: key } = await createAccount();
    const sendOnly = await createKey(key, { name: "sender", scopes: ["send"] });
    const browser = await signIn(sendOnly.key);
    const page = await browser.get("/dashboard/messages");
    expect(await page.text()).not.toContain('href="/dashboard/inbound"');
    expect((await browser.get("/dashboard/inbound")).status).toBe(403);
  });
});
