import { env } from "cloudflare:workers";
import { expect } from "vitest";
import { call, createAccount, d1OfAccount, json } from "./helpers";
import { eventually } from "./sending";

export type AiRequest = {
  id: string;
  status: "queued" | "running" | "completed" | "failed";
  input: Record<string, unknown>;
  result: {
    variations: { subject: string; preheader: string | null; html: string; text: string }[];
    followups: { delay_days: number; subject: string; preheader: string | null; html: string; text: string }[];
  } | null;
  campaign_ids: string[];
  error: string | null;
  usage: { input_tokens: number; output_tokens: number } | null;
  attempts: number;
  completed_at: string | null;
};

export const aiFeatures = ["email_api", "smtp_relay", "campaigns", "ai"];

/** A unique case id: the fake provider matches its scripted answers on `[case:<id>]` in the prompt. */
export const newCase = () => crypto.randomUUID().slice(0, 12);

export async function aiAccount(limit = 10, overrides: Record<string, unknown> = {}) {
  return createAccount({ features: aiFeatures, ai_generations_per_month: limit, ...overrides });
}

type Step = { status?: number; headers?: Record<string, string>; delay_ms?: number; content?: string; body?: string };

export async function script(caseId: string, steps: Step[]): Promise<void> {
  const response = await fetch(`${env.TEST_AI_PROVIDER_URL}/_script`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ case: caseId, steps }),
  });
  expect(response.status).toBe(201);
}

export type ProviderRequest = {
  headers: Record<string, string>;
  body: { model: string; messages: { role: string; content: string }[]; response_format: { type: string; json_schema: { name: string } } };
};

export async function providerRequests(caseId: string): Promise<ProviderRequest[]> {
  const response = await fetch(`${env.TEST_AI_PROVIDER_URL}/_requests?case=${caseId}`);
  return (await response.json<{ data: ProviderRequest[] }>()).data;
}

export async function postDraft(key: string, body: Record<string, unknown>): Promise<Response> {
  return call("/api/v1/ai/campaign", { key, body });
}

/** POSTs the request (202 expected) and polls it until it is completed or failed. */
export async function generated(key: string, body: Record<string, unknown>): Promise<AiRequest> {
  const accepted = await postDraft(key, body);
  expect(accepted.status).toBe(202);
  const { id, status } = await json<{ id: string; status: string }>(accepted);
  expect(status).toBe("queued");
  return settled(key, id);
}

export async function settled(key: string, id: string): Promise<AiRequest> {
  return eventually(async () => {
    const request = await json<AiRequest>(await call(`/api/v1/ai/requests/${id}`, { key }));
    return request.status === "completed" || request.status === "failed" ? request : undefined;
  }, 12_000);
}

export async function requestCount(accountId: string): Promise<number> {
  const row = await (await d1OfAccount(accountId))
    .prepare("SELECT count(*) AS n FROM ai_requests WHERE account_id = ?")
    .bind(accountId)
    .first<{ n: number }>();
  return row!.n;
}
