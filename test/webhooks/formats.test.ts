import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { Resend } from "resend";
import { describe, expect, it } from "vitest";
import type { EventType } from "../../src/domain/events/events";
import { recordEvents } from "../../src/domain/webhooks/dispatch";
import { sampleEventData } from "../../src/domain/webhooks/samples";
import { call, createAccount, json, type CreatedAccount } from "../support/helpers";
import { verifiedDomain } from "../support/sending";
import { createEndpoint, deliveriesOf, receiverPath, receiverUrl, uniqueKey, waitForRequests, type ReceivedRequest } from "../support/webhooks";

// Webhook endpoints in a peer's format: the same events, posted in the body a handler written for Resend or Postmark
// reads, signed as before (Resend's receivers also get the svix-* header names its client verifies).

async function setup() {
  const account = await createAccount({ send_credits: 100 });
  const domain = await verifiedDomain(account.api_key);
  const endpointIn = async (format: string) => {
    const path = receiverPath();
    const endpoint = await createEndpoint(account.api_key, { url: receiverUrl(path), events: ["*"], format });
    return { path, endpoint };
  };
  return { account, from: `Acme <hello@${domain.name}>`, resend: await endpointIn("resend"), postmark: await endpointIn("postmark") };
}

const bodyOf = (request: ReceivedRequest) => JSON.parse(request.body) as { type?: string; RecordType?: string; data?: Record<string, unknown> };

/** Events of a message as its producers write them (delivery feedback, tracking), dispatched like theirs. */
async function recordFor(account: CreatedAccount, messageId: string, types: EventType[]) {
  await recordEvents(
    openCtx(env, undefined, account),
    types.map((type) => ({
      accountId: account.id,
      type,
      subjectId: messageId,
      dedupeKey: uniqueKey(type),
      data: { ...sampleEventData[type], message_id: messageId, recipient: "ann@example.net", tags: ["category:receipt"] },
    })),
  );
}

describe("webhook endpoints in a peer's format", () => {
  it("posts Resend's payloads with svix headers that the resend client's webhooks.verify accepts", async () => {
    const { account, from, resend } = await setup();
    expect(resend.endpoint).toMatchObject({ format: "resend" });
    const sent = await call("/api/v1/send", {
      key: account.api_key,
      body: { from, to: "ann@example.net", subject: "Receipt", text: "Thanks", tags: ["category:receipt"] },
    });
    const id = (await json<{ id: string }>(sent)).id;
    const [first] = await waitForRequests(resend.path, 1);
    const verified = new Resend("re_unused").webhooks.verify({
      payload: first!.body,
      headers: { id: first!.headers["svix-id"]!, timestamp: first!.headers["svix-timestamp"]!, signature: first!.headers["svix-signature"]! },
      webhookSecret: resend.endpoint.secret,
    });
    expect(verified).toMatchObject({
      type: "email.sent",
      data: { email_id: id, from, to: ["ann@example.net"], subject: "Receipt", tags: { category: "receipt" } },
    });

    await recordFor(account, id, ["relay.delivered", "relay.bounced", "relay.complained", "opened", "clicked", "verification.completed"]);
    const all = await waitForRequests(resend.path, 6);
    const byType = new Map(all.map((request) => [bodyOf(request).type, bodyOf(request).data]));
    expect([...byType.keys()].sort()).toEqual([
      "email.bounced",
      "email.clicked",
      "email.complained",
      "email.delivered",
      "email.opened",
      "email.sent",
    ]);
    expect(byType.get("email.bounced")).toMatchObject({ email_id: id, to: ["ann@example.net"], bounce: { type: "Permanent", subType: "General" } });
    expect(byType.get("email.clicked")).toMatchObject({ click: { link: "https://example.com/pricing", ipAddress: "203.0.113.7" } });
    // An event Resend has no counterpart for is not posted, and logged as such rather than retried.
    const deliveries = await deliveriesOf(account.api_key, resend.endpoint.id);
    expect(deliveries.find((delivery) => delivery.event_type === "verification.completed")).toMatchObject({
      status: "succeeded",
      status_code: null,
      response_snippet: "Not sent: verification.completed has no resend counterpart",
    });
  });

  it("posts Postmark's Delivery, Bounce, SpamComplaint, Open and Click bodies", async () => {
    const { account, postmark } = await setup();
    await recordFor(account, "msg_pm0000000000000000000", ["relay.delivered", "relay.bounced", "relay.complained", "opened", "clicked"]);
    const requests = await waitForRequests(postmark.path, 5);
    const byType = new Map(requests.map((request) => [bodyOf(request).RecordType, bodyOf(request) as Record<string, unknown>]));
    expect(byType.get("Delivery")).toMatchObject({ MessageID: "msg_pm0000000000000000000", Recipient: "ann@example.net", Tag: "category:receipt" });
    expect(byType.get("Bounce")).toMatchObject({ Type: "HardBounce", TypeCode: 1, Email: "ann@example.net", Inactive: true });
    expect(byType.get("SpamComplaint")).toMatchObject({ Type: "SpamComplaint", TypeCode: 512, Email: "ann@example.net" });
    expect(byType.get("Open")).toMatchObject({ RecordType: "Open", Recipient: "ann@example.net", FirstOpen: true });
    expect(byType.get("Click")).toMatchObject({ OriginalLink: "https://example.com/pricing", ClickLocation: "HTML" });

    const changed = await call(`/api/v1/webhooks/${postmark.endpoint.id}`, { key: account.api_key, method: "PATCH", body: { format: "mailforge" } });
    expect(await json(changed)).toMatchObject({ format: "mailforge" });
    const refused = await call(`/api/v1/webhooks/${postmark.endpoint.id}`, { key: account.api_key, method: "PATCH", body: { format: "sendgrid" } });
    expect(refused.status).toBe(422);
  });
});
