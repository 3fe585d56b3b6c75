import { z } from "../lib/openapi";
import { Timestamp } from "../lib/openapi";
import { scopeInput } from "../domain/accounts/input";
import { features } from "../access";

export const FeatureSchema = z.enum(features).openapi("Feature", {
  description:
    "email_api and smtp_relay enable sending; campaigns enables campaigns; automations enables automations; ai enables AI campaign drafts.",
});

export const BalancesSchema = z
  .object({
    send: z.object({ balance: z.number().int(), reserved: z.number().int(), available: z.number().int() }),
    verify: z.object({ balance: z.number().int(), available: z.number().int() }),
  })
  .openapi("Credits");

export const AccountSchema = z
  .object({
    id: z.string().openapi({ example: "acc_4Qm0c2JYd7pG1rXw8LkN3e" }),
    name: z.string(),
    plan: z.string(),
    features: z.array(z.string()),
    limits: z.object({
      daily_send_limit: z.number().int(),
      rate_limit_per_minute: z.number().int(),
      ai_generations_per_month: z.number().int().openapi({ description: "AI draft requests per UTC month (POST /ai/campaign)" }),
    }),
    balances: BalancesSchema,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Account");

export const ApiKeySchema = z
  .object({
    id: z.string().openapi({ example: "key_9sdf8Q2mZ0bX1c4VnL7pT3" }),
    name: z.string(),
    prefix: z.string().openapi({ example: "sk_live_Ab3d", description: "First characters of the key, for recognising it" }),
    scopes: z.array(scopeInput).nullable().openapi({ description: "null: full access" }),
    mode: z.enum(["live", "test"]),
    created_at: Timestamp,
    last_used_at: Timestamp.nullable(),
  })
  .openapi("ApiKey");

export const CreatedApiKeySchema = ApiKeySchema.extend({
  key: z.string().openapi({ description: "The full key. Shown only in this response; store it now.", example: "sk_live_…" }),
}).openapi("CreatedApiKey");
