import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { runDurableObjectAlarm } from "cloudflare:test";
import { expect, it } from "vitest";
import { recordEvents } from "../../src/domain/webhooks/dispatch";
import { createAccount } from "../support/helpers";
import {
  addReceiverRule,
  createEndpoint,
  deliveriesOf,
  receivedOn,
  receiverPath,
  receiverUrl,
  uniqueKey,
  waitForRequests,
} from "../support/webhooks";

it("a slow endpoint does not delay another endpoint's deliveries (each endpoint delivers from its own object)", async () => {
  const account = await createAccount();
  const slowPath = receiverPath();
  const fastPath = receiverPath();
  const slowDelayMs = 4_000;
  await addReceiverRule({ path: slowPath, status: 200, delay_ms: slowDelayMs, times: 10 });
  const slow = await createEndpoint(account.api_key, { url: receiverUrl(slowPath), events: ["*"] });
  await createEndpoint(account.api_key, { url: receiverUrl(fastPath), events: ["*"] });

  await recordEvents(
    openCtx(env, undefined, account),
    Array.from({ length: 5 }, (_, i) => ({
      accountId: account.id,
      type: "relay.delivered" as const,
      dedupeKey: uniqueKey(`isolation-${i}`),
      data: { message_id: `msg_isolation_${i}`, recipient: `r${i}@example.com` },
    })),
  );
  const fast = await waitForRequests(fastPath, 5, 10_000);
  // Every fast delivery arrived before the slow receiver answered its first request.
  const slowRequests = await receivedOn(slowPath);
  expect(slowRequests.length).toBeGreaterThan(0);
  const firstSlowAnswer = Math.min(...slowRequests.map((request) => request.received_at_ms)) + slowDelayMs;
  expect(Math.max(...fast.map((request) => request.received_at_ms))).toBeLessThan(firstSlowAnswer);
  // The slow receiver still gets every event, answered and logged once it responds.
  for (const deadline = Date.now() + 15_000; ; ) {
    const logged = await deliveriesOf(account.api_key, slow.id);
    if (logged.filter((delivery) => delivery.status === "succeeded").length === 5) break;
    if (Date.now() > deadline) throw new Error("slow deliveries were not logged in time");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}, 30_000);

it("an endpoint object drops an attempt whose event no longer exists instead of keeping it forever", async () => {
  const stub = env.WEBHOOK_ENDPOINT_QUEUE.getByName("wh_missing_endpoint");
  await stub.enqueue([{ event_id: "evt_missing", endpoint_id: "wh_missing_endpoint", attempt: 1 }]);
  // The alarm set by enqueue may already be running on its own; run it now if it has not started.
  let pending = await stub.pending();
  for (const deadline = Date.now() + 5_000; pending.length > 0 && Date.now() < deadline; pending = await stub.pending()) {
    await runDurableObjectAlarm(stub);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(pending).toEqual([]);
});
