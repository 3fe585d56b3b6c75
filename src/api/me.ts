import { serializeAccount } from "../domain/accounts/accounts";
import { createRouter, jsonResponse, keyedRoute, Timestamp, z } from "../lib/openapi";
import { scopeInput } from "../domain/accounts/input";
import { AccountSchema, BalancesSchema } from "./schemas";
import { balancesOf, findBalances } from "../domain/accounts/accounts";
import { aiUsage } from "../domain/ai/requests";

const MeSchema = AccountSchema.extend({
  api_key: z.object({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    mode: z.enum(["live", "test"]),
    scopes: z.array(scopeInput).nullable().openapi({ description: "null: full access" }),
  }),
  ai_usage: z
    .object({
      limit: z.number().int().openapi({ description: "limits.ai_generations_per_month" }),
      used: z.number().int().openapi({ description: "Generations completed this UTC month" }),
      in_progress: z.number().int().openapi({ description: "Requests queued or running; they count against the limit too" }),
      resets_at: Timestamp.openapi({ description: "Start of the next UTC month" }),
    })
    .openapi({ description: "AI drafts (POST /ai/campaign) this month; failed requests do not count" }),
}).openapi("Me");

const getMe = keyedRoute("any", {
  method: "get",
  path: "/me",
  tags: ["Account"],
  summary: "The account and the key making the request",
  responses: { 200: jsonResponse(MeSchema, "The account, its limits and balances, and this key's scopes") },
});

const getCredits = keyedRoute("reports", {
  method: "get",
  path: "/credits",
  tags: ["Account"],
  summary: "Credit balances",
  description: "Sending and verification credits are separate balances; `reserved` sending credits are held by scheduled campaigns.",
  responses: { 200: jsonResponse(BalancesSchema, "Balances") },
});

export const meRoutes = createRouter()
  .openapi(getMe, async (c) => {
    const { account, apiKey } = c.get("auth");
    const [ai, balances] = await Promise.all([aiUsage(c.var.ctx.db, account), findBalances(c.var.ctx.db, account.id)]);
    return c.json(
      {
        ...serializeAccount(account, balances),
        api_key: { id: apiKey.id, name: apiKey.name, prefix: apiKey.prefix, mode: apiKey.mode, scopes: apiKey.scopes },
        ai_usage: { limit: ai.limit, used: ai.used, in_progress: ai.inProgress, resets_at: ai.resetsAt },
      },
      200,
    );
  })
  .openapi(getCredits, async (c) => c.json(balancesOf(await findBalances(c.var.ctx.db, c.get("auth").account.id)), 200));
