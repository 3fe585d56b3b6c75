import { env } from "cloudflare:workers";
import { createExecutionContext } from "cloudflare:test";
import { drizzle } from "drizzle-orm/d1";
import { expect, it } from "vitest";
import { findAccount } from "../../src/domain/accounts/accounts";
import { acceptMessage, type AcceptInput } from "../../src/domain/sending/accept";
import { createAccount } from "../helpers";
import { messageOf, sendBalance, verifiedDomain } from "./helpers";

it("undoes an acceptance the send queue refuses: 503, refunded, failed, and the Idempotency-Key free for the retry", async () => {
  const created = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(created.api_key);
  const account = (await findAccount(drizzle(env.DB), created.id))!;
  const input: AcceptInput = {
    source: "api",
    from: { address: `hello@${domain.name}` },
    recipients: ["ann@example.org", "bob@example.org"],
    tags: [],
    metadata: {},
    compose: () => ({
      subject: "Hi",
      content: { kind: "compose", to: ["ann@example.org", "bob@example.org"], text: "Hi", variables: {}, attachments: [] },
    }),
  };
  const idempotency = { key: "retry-me", route: "POST /send", requestHash: "h" };
  const refusingQueue = {
    send: async () => Promise.reject(new Error("queue unavailable")),
    sendBatch: async () => Promise.reject(new Error("queue unavailable")),
  } as unknown as Queue;

  const refused = await acceptMessage(
    { ...env, SEND_QUEUE: refusingQueue },
    createExecutionContext(),
    { account, testMode: false },
    input,
    idempotency,
  );
  expect(refused).toEqual({ kind: "queue_unavailable" });
  expect(await sendBalance(created.api_key)).toBe(10);
  const failed = await env.DB.prepare("SELECT id FROM messages WHERE account_id = ?").bind(account.id).first<{ id: string }>();
  const message = await messageOf(created.api_key, failed!.id);
  expect(message.status).toBe("failed");
  expect(message.recipients.map((recipient) => recipient.status)).toEqual(["failed", "failed"]);

  // The client retries with the same key, as the 503 says: a new message is accepted, not a stale replay.
  const retried = await acceptMessage(env, createExecutionContext(), { account, testMode: false }, input, idempotency);
  expect(retried).toMatchObject({ kind: "accepted", replayed: false, body: { credits_charged: 2, status: "queued" } });
  expect(retried.kind === "accepted" && retried.body.id).not.toBe(failed!.id);
  expect(await sendBalance(created.api_key)).toBe(8);
});
