import { openCtx } from "../../src/db/client";
import { env } from "cloudflare:workers";
import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/app";
import { processAiRequest, retryDelaySeconds } from "../../src/domain/ai/generation";
import { retryAfterSeconds } from "../../src/domain/ai/openai";
import { ProviderError } from "../../src/domain/ai/adapter";
import { chooseProvider, DEFAULT_WORKERS_AI_MODEL } from "../../src/domain/ai/provider";
import { type AiBinding, workersAiProvider } from "../../src/domain/ai/workers-ai";
import { consumeAiDeadLetters } from "../../src/queues/ai";
import { call, d1Of, json, type CreatedAccount } from "../support/helpers";
import { type AiRequest, aiAccount, newCase, providerRequests } from "../support/ai";

/** Stores a request through POST /ai/campaign with a queue that only records, so the test runs the generation itself. */
async function storedRequest(
  account: CreatedAccount,
  prompt: string,
  extra: Record<string, unknown> = {},
  envOverrides: Record<string, unknown> = {},
) {
  const sent: unknown[] = [];
  const recordingQueue = { send: async (body: unknown) => void sent.push(body) } as unknown as Queue;
  const response = await createApp().request(
    new Request("http://localhost/api/v1/ai/campaign", {
      method: "POST",
      headers: { Authorization: `Bearer ${account.api_key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ prompt, ...extra }),
    }),
    undefined,
    { ...env, AI_QUEUE: recordingQueue, ...envOverrides },
    createExecutionContext(),
  );
  expect(response.status).toBe(202);
  const { id } = await json<{ id: string }>(response);
  // The message names the database the request's row is in, for the consumer to open.
  expect(sent).toEqual([{ request_id: id, database: account.database }]);
  return id;
}

const requestOf = async (key: string, id: string) => json<AiRequest>(await call(`/api/v1/ai/requests/${id}`, { key }));

/** A stand-in for the Workers AI binding (Cloudflare's, not ours): answers what it is given to answer, records the calls. */
function aiBinding(answer: () => Promise<unknown>) {
  const calls: { model: string; inputs: Record<string, unknown> }[] = [];
  const binding: AiBinding = {
    run: async (model, inputs) => {
      calls.push({ model, inputs });
      return answer();
    },
  };
  return { binding, calls };
}

const drafts = (variations: number) =>
  JSON.stringify({
    variations: Array.from({ length: variations }, (_, i) => ({ subject: `S${i}`, preheader: "", html: `<p>Body ${i}</p>`, text: "" })),
    followups: [],
  });

describe("retry timing", () => {
  it("backs off exponentially from the base, waits at least the provider's Retry-After, at most an hour", () => {
    expect([1, 2, 3, 4].map((attempt) => retryDelaySeconds(30, attempt))).toEqual([30, 60, 120, 240]);
    expect(retryDelaySeconds(30, 1, 600)).toBe(600);
    expect(retryDelaySeconds(30, 2, 5)).toBe(60);
    expect(retryDelaySeconds(30, 20)).toBe(3_600);
  });

  it("reads Retry-After as seconds or as an HTTP date", () => {
    const now = Date.parse("2026-11-23T10:00:00Z");
    expect(retryAfterSeconds("7", now)).toBe(7);
    expect(retryAfterSeconds("Mon, 23 Nov 2026 10:01:30 GMT", now)).toBe(90);
    expect(retryAfterSeconds("soon", now)).toBeUndefined();
    expect(retryAfterSeconds(null, now)).toBeUndefined();
  });
});

describe("Workers AI adapter", () => {
  it("sends the messages with a json_schema response_format and reads text or an already-parsed answer, with its usage", async () => {
    const { binding, calls } = aiBinding(async () => ({ response: { variations: [] }, usage: { prompt_tokens: 11, completion_tokens: 7 } }));
    const provider = workersAiProvider(binding, "@cf/test/model", 5_000);
    const completion = await provider.complete({ messages: [{ role: "user", content: "Hi" }], schema: { name: "x", schema: { type: "object" } } });
    expect(completion).toEqual({ content: '{"variations":[]}', usage: { inputTokens: 11, outputTokens: 7 } });
    expect(calls[0]).toMatchObject({
      model: "@cf/test/model",
      inputs: { messages: [{ role: "user", content: "Hi" }], response_format: { type: "json_schema", json_schema: { type: "object" } } },
    });

    const text = workersAiProvider(aiBinding(async () => ({ response: '{"a":1}' })).binding, "m", 5_000);
    expect(await text.complete({ messages: [], schema: { name: "x", schema: {} } })).toEqual({
      content: '{"a":1}',
      usage: { inputTokens: 0, outputTokens: 0 },
    });
  });

  it("retries capacity errors and time-outs, not an unknown model", async () => {
    const failing = (message: string) =>
      workersAiProvider(aiBinding(async () => Promise.reject(new Error(message))).binding, "m", 5_000).complete({
        messages: [],
        schema: { name: "x", schema: {} },
      });
    await expect(failing("3040: Capacity temporarily exceeded, please try again.")).rejects.toMatchObject({ retryable: true });
    await expect(failing("5007: No such model m or task")).rejects.toMatchObject({ retryable: false });
    const slow = workersAiProvider(aiBinding(() => new Promise(() => undefined)).binding, "m", 50);
    const error = await slow.complete({ messages: [], schema: { name: "x", schema: {} } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ retryable: true, message: "Workers AI (m) failed: no answer within 0.05 s" });
  });

  it("serves when the deployment has the AI binding and no AI_BASE_URL, with AI_MODEL or the default model", async () => {
    const { binding, calls } = aiBinding(async () => ({ response: drafts(2), usage: { prompt_tokens: 3, completion_tokens: 4 } }));
    const withBinding = { ...env, AI_BASE_URL: "", AI_MODEL: "", AI: binding };
    const choice = chooseProvider(withBinding);
    expect(choice).toMatchObject({ kind: "configured", provider: { name: "workers-ai" } });

    const account = await aiAccount();
    const id = await storedRequest(account, "Binding", { variations: 2 }, { AI_BASE_URL: "", AI: binding });
    expect(await processAiRequest(openCtx(withBinding, undefined, account), id)).toEqual({ kind: "done" });

    expect(calls.map((c) => c.model)).toEqual([DEFAULT_WORKERS_AI_MODEL]);
    const request = await requestOf(account.api_key, id);
    expect(request).toMatchObject({ status: "completed", usage: { input_tokens: 3, output_tokens: 4 } });
    expect(request.campaign_ids).toHaveLength(2);
    expect(request.result!.variations[1]).toEqual({ subject: "S1", preheader: null, html: "<p>Body 1</p>", text: "Body 1" });
  });
});

describe("queue delivery", () => {
  it("writes the drafts once when two deliveries of the same request run at the same time", async () => {
    const account = await aiAccount();
    const caseId = newCase();
    const id = await storedRequest(account, `Twice [case:${caseId}]`, { variations: 2, followups: 1 });

    const outcomes = await Promise.all([
      processAiRequest(openCtx(env, undefined, account), id),
      processAiRequest(openCtx(env, undefined, account), id),
    ]);

    expect(outcomes).toEqual([{ kind: "done" }, { kind: "done" }]);
    const request = await requestOf(account.api_key, id);
    expect(request.status).toBe("completed");
    expect(request.campaign_ids).toHaveLength(3);
    const campaigns = await d1Of(account).prepare("SELECT id FROM campaigns WHERE account_id = ? ORDER BY id").bind(account.id).all<{ id: string }>();
    expect(campaigns.results.map((row) => row.id)).toEqual([...request.campaign_ids].sort());
    // A delivery after completion does nothing, not even a provider call.
    const callsBefore = (await providerRequests(caseId)).length;
    expect(await processAiRequest(openCtx(env, undefined, account), id)).toEqual({ kind: "done" });
    expect(await providerRequests(caseId)).toHaveLength(callsBefore);
  });

  it("the dead-letter consumer fails a request its consumer could not finish, and leaves a completed one alone", async () => {
    const account = await aiAccount(2);
    const stuck = await storedRequest(account, "Stuck");
    const done = await storedRequest(account, "Done");
    await processAiRequest(openCtx(env, undefined, account), done);

    const batch = createMessageBatch("mailforge-ai-dlq", [
      { id: "dlq-1", timestamp: new Date(), attempts: 13, body: { request_id: stuck, database: account.database } },
      { id: "dlq-2", timestamp: new Date(), attempts: 13, body: { request_id: done, database: account.database } },
      { id: "dlq-3", timestamp: new Date(), attempts: 13, body: { unexpected: true } },
    ]);
    await consumeAiDeadLetters(batch, env);

    expect((await getQueueResult(batch, createExecutionContext())).ackAll).toBe(false);
    expect((await getQueueResult(batch, createExecutionContext())).explicitAcks.sort()).toEqual(["dlq-1", "dlq-2", "dlq-3"]);
    expect(await requestOf(account.api_key, stuck)).toMatchObject({
      status: "failed",
      error: "The generation stopped after repeated errors; it does not count against the quota",
    });
    expect((await requestOf(account.api_key, done)).status).toBe("completed");
    const me = await json<{ ai_usage: Record<string, number> }>(await call("/api/v1/me", { key: account.api_key }));
    expect(me.ai_usage).toMatchObject({ used: 1, in_progress: 0 });
  });
});
