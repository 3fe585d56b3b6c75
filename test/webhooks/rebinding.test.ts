import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { deliveryContext, type DeliveryContext } from "../../src/domain/webhooks/delivery";
import { recordEvents } from "../../src/domain/webhooks/dispatch";
import { allowPrivateWebhookUrls, checkWebhookUrl } from "../../src/domain/webhooks/url-policy";
import { createAccount } from "../support/helpers";
import { createEndpoint, deliveriesOf, envWith, RecordingQueue, runConsumer, uniqueKey } from "../support/webhooks";

// The SSRF check at delivery time against the dev DoH server, with a zone that changes between two deliveries. The
// Workers test environment allows private URLs (the receiver is on loopback), so these runs turn that off, as
// production has it. The host names resolve only in the dev zone, so a delivery that passes the check fails at
// fetch() ("Request failed", which workerd also logs as an internal error); one the check refuses says "Not sent".

const PUBLIC = "93.184.215.14";

async function publishA(name: string, address: string, ttl: number) {
  const response = await fetch(`${env.TEST_DOH_ADMIN_URL}/zone/${name}`, { method: "PUT", body: JSON.stringify({ A: [{ value: address, ttl }] }) });
  expect(response.status).toBe(200);
}

async function setup(ttl: number) {
  const name = `rebind-${crypto.randomUUID().slice(0, 8)}.webhooks-test`;
  await publishA(name, PUBLIC, ttl);
  const account = await createAccount();
  const endpoint = await createEndpoint(account.api_key, { url: `https://${name}/hook`, events: ["*"] });
  const queue = new RecordingQueue();
  const strict = envWith(queue, { ALLOW_PRIVATE_WEBHOOK_URLS: "false" });
  await recordEvents(openCtx(envWith(queue), undefined, account), [
    { accountId: account.id, type: "relay.delivered", dedupeKey: uniqueKey("rebind"), data: { message_id: "msg_x" } },
  ]);
  const [dispatched] = queue.take();
  return { name, account, endpoint, queue, strict, message: dispatched!.body };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("webhook SSRF re-check at delivery time", () => {
  it("refuses the next delivery once the name moved to 10.0.0.1, although the earlier answer's TTL (300 s) has not run out", async () => {
    const { name, account, endpoint, queue, strict, message } = await setup(300);
    await runConsumer([message], { env: strict, timeoutMs: 2000 });
    const [first] = await deliveriesOf(account.api_key, endpoint.id);
    expect(first!.response_snippet).toMatch(/^Request failed/);

    await publishA(name, "10.0.0.1", 300);
    const [retry] = queue.take();
    await runConsumer([retry!.body], { env: strict, timeoutMs: 2000 });
    const deliveries = await deliveriesOf(account.api_key, endpoint.id);
    expect(deliveries.find((delivery) => delivery.attempt === 2)).toMatchObject({
      status_code: null,
      response_snippet: `Not sent: ${name} resolves to 10.0.0.1, a private, loopback or otherwise non-public address`,
    });
  });

  // The same check as attemptDelivery makes, through the resolver one delivery run shares (no fetch: the names here
  // do not resolve outside the dev zone, so a fetch would only fail).
  const checkIn = (context: DeliveryContext, name: string) =>
    checkWebhookUrl(`https://${name}/hook`, { allowPrivate: allowPrivateWebhookUrls(context.env), resolver: context.resolver });

  it("within one run, reuses an answer no longer than its own TTL (1 s here, not the 30 s floor of bulk lookups)", async () => {
    const { name, strict } = await setup(1);
    const context = deliveryContext(strict);
    expect(await checkIn(context, name)).toMatchObject({ ok: true });

    await publishA(name, "127.0.0.1", 1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect(await checkIn(context, name)).toEqual({
      ok: false,
      reason: `${name} resolves to 127.0.0.1, a private, loopback or otherwise non-public address`,
    });
  });

  it("within one run, reuses a long-TTL answer for at most 30 s", async () => {
    const { name, strict } = await setup(3600);
    const context = deliveryContext(strict);
    vi.useFakeTimers({ toFake: ["Date"] });
    expect(await checkIn(context, name)).toMatchObject({ ok: true });

    await publishA(name, "127.0.0.1", 3600);
    vi.setSystemTime(Date.now() + 29_000);
    expect(await checkIn(context, name)).toMatchObject({ ok: true });
    vi.setSystemTime(Date.now() + 2_000);
    expect(await checkIn(context, name)).toMatchObject({ ok: false, reason: expect.stringContaining("resolves to 127.0.0.1") });
  });
});
