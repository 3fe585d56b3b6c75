import { openCtx } from "../../src/db/client";
import { sharedDb } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext } from "cloudflare:test";
import { expect, it, vi } from "vitest";
import { findAccount } from "../../src/domain/accounts/accounts";
import { acceptMessage, acceptMessages, type AcceptInput } from "../../src/domain/sending/accept";
import { call, createAccount, d1Of, json } from "../support/helpers";
import { messageOf, sendBalance, verifiedDomain } from "../support/sending";

it("undoes an acceptance the send queue refuses: refunded, failed, and the Idempotency-Key free for the retry", async () => {
  const created = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(created.api_key);
  const account = (await findAccount(sharedDb(env), created.id))!;
  const input: AcceptInput = {
    source: "api",
    stream: "transactional",
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
    openCtx({ ...env, SEND_QUEUE: refusingQueue }, createExecutionContext(), account),
    { account, testMode: false },
    input,
    idempotency,
  );
  expect(refused).toEqual({ kind: "queue_unavailable" });
  expect(await sendBalance(created.api_key)).toBe(10);
  const failed = await d1Of(account).prepare("SELECT id FROM messages WHERE account_id = ?").bind(account.id).first<{ id: string }>();
  const message = await messageOf(created.api_key, failed!.id);
  expect(message.status).toBe("failed");
  expect(message.recipients.map((recipient) => recipient.status)).toEqual(["failed", "failed"]);

  // The client retries with the same key, as the 429 says: a new message is accepted, not a stale replay.
  const retried = await acceptMessage(openCtx(env, createExecutionContext(), account), { account, testMode: false }, input, idempotency);
  expect(retried).toMatchObject({ kind: "accepted", replayed: false, body: { credits_charged: 2, status: "queued" } });
  expect(retried.kind === "accepted" && retried.body.id).not.toBe(failed!.id);
  expect(await sendBalance(created.api_key)).toBe(8);
});

it("undoes a whole batch the send queue refuses: every message failed, every credit back, the Idempotency-Key free", async () => {
  const created = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(created.api_key);
  const account = (await findAccount(sharedDb(env), created.id))!;
  const inputs: AcceptInput[] = ["ann", "bob", "cid"].map((name) => ({
    source: "api",
    stream: "transactional",
    from: { address: `hello@${domain.name}` },
    recipients: [`${name}@example.org`],
    tags: [],
    metadata: {},
    compose: () => ({ subject: `Hi ${name}`, content: { kind: "compose", to: [`${name}@example.org`], text: "Hi", variables: {}, attachments: [] } }),
  }));
  const idempotency = { key: "batch-retry", route: "POST /send/batch", requestHash: "h" };
  let attempts = 0;
  const refusingQueue = {
    sendBatch: async () => {
      attempts += 1;
      throw new Error("queue unavailable");
    },
  } as unknown as Queue;

  const refused = await acceptMessages(
    openCtx({ ...env, SEND_QUEUE: refusingQueue }, createExecutionContext(), account),
    { account, testMode: false },
    inputs,
    idempotency,
  );
  expect(refused).toEqual({ kind: "queue_unavailable" });
  // Tried twice before giving up.
  expect(attempts).toBe(2);
  expect(await sendBalance(created.api_key)).toBe(10);
  const stored = await d1Of(account)
    .prepare("SELECT id, status FROM messages WHERE account_id = ? ORDER BY subject")
    .bind(account.id)
    .all<{ id: string; status: string }>();
  expect(stored.results.map((row) => row.status)).toEqual(["failed", "failed", "failed"]);
  for (const row of stored.results)
    expect((await messageOf(created.api_key, row.id)).recipients.map((recipient) => recipient.status)).toEqual(["failed"]);

  const retried = await acceptMessages(openCtx(env, createExecutionContext(), account), { account, testMode: false }, inputs, idempotency);
  expect(retried).toMatchObject({ kind: "accepted", replayed: false });
  const ids = retried.kind === "accepted" ? retried.body.data.map((body) => body.id) : [];
  expect(ids).toHaveLength(3);
  for (const id of ids) expect(stored.results.map((row) => row.id)).not.toContain(id);
  expect(await sendBalance(created.api_key)).toBe(7);
});

it("answers a send or batch the queue refuses as the spec's temporary refusal: 429 temporarily_rejected with Retry-After", async () => {
  const created = await createAccount({ send_credits: 10 });
  const domain = await verifiedDomain(created.api_key);
  const message = { from: `hello@${domain.name}`, to: ["ann@example.org"], subject: "Hi", text: "Hi" };
  // The test shares the Worker's env, so the route sees this refusing queue.
  const refusing = vi.spyOn(env.SEND_QUEUE, "sendBatch").mockRejectedValue(new Error("queue unavailable"));
  try {
    for (const [path, body] of [
      ["/api/v1/send", message],
      ["/api/v1/send/batch", [message, { ...message, to: ["bob@example.org"] }]],
    ] as const) {
      const response = await call(path, { key: created.api_key, body });
      expect(response.status, path).toBe(429);
      expect(response.headers.get("Retry-After"), path).toBe("10");
      expect(await json(response), path).toEqual({
        code: "temporarily_rejected",
        message: "The message could not be queued just now; nothing was charged. Retry after the Retry-After seconds",
      });
    }
  } finally {
    refusing.mockRestore();
  }
  expect(await sendBalance(created.api_key)).toBe(10);
});
