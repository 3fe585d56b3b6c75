import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { purgeExpiredData } from "../../src/domain/retention/purge";
import { call, createAccount } from "../helpers";
import { deliver, inboundList, inboundMail, inboundObjects, receivingDomain } from "./helpers";

const daysAgo = (days: number) => new Date(Date.now() - days * 86_400_000).toISOString();

describe("retention of received mail", () => {
  it("purges received mail older than RETENTION_DAYS with its raw bytes and attachments, and keeps younger mail", async () => {
    const { api_key: key } = await createAccount();
    const domain = await receivingDomain(key);
    const to = `support@${domain.name}`;
    await deliver(to, inboundMail("replyWithAttachments", { to }));
    const [old] = await inboundList(key);
    await deliver(to, inboundMail("replyWithAttachments", { to }));
    const young = (await inboundList(key)).find((row) => row.id !== old!.id)!;
    // Received 31 days ago (RETENTION_DAYS is 30 by default).
    await env.DB.prepare("UPDATE inbound_emails SET created_at = ? WHERE id = ?").bind(daysAgo(31), old!.id).run();
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${old!.id}/`))).toHaveLength(3);

    expect(await purgeExpiredData(env)).toMatchObject({ inboundEmails: 1 });

    expect((await call(`/api/v1/inbound/${old!.id}`, { key })).status).toBe(404);
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${old!.id}/`))).toEqual([]);
    expect((await inboundList(key)).map((row) => row.id)).toEqual([young.id]);
    expect((await inboundObjects()).filter((object) => object.startsWith(`inbound/${young.id}/`))).toHaveLength(3);
    expect((await call(`/api/v1/inbound/${young.id}/attachments/1`, { key })).status).toBe(200);
  });
});
