import { eq } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { statement } from "../db/client";
import { accounts, apiKeys } from "../db/schema";
import { defaultFeatures, findAccount, planNames, plans, serializeAccount } from "../domain/accounts/accounts";
import { generateApiKey } from "../domain/accounts/api-keys";
import { topUpStatements } from "../domain/credits/ledger";
import { notFound } from "../errors";
import { newId, nowIso } from "../lib/ids";
import { adminRoute, createRouter, evenWithFieldErrors, errorResponse, IdParam, jsonBody, jsonResponse, z } from "../lib/openapi";
import { AccountSchema, FeatureSchema } from "../api/schemas";

const credits = z.number().int().min(0).max(1_000_000_000);
const limits = {
  daily_send_limit: z.number().int().min(0).max(100_000_000).optional(),
  rate_limit_per_minute: z.number().int().min(1).max(1_000_000).optional(),
};

const CreateAccountSchema = z
  .object({
    name: z.string().trim().min(1).max(200),
    plan: z.enum(planNames).default("free"),
    send_credits: credits.default(0),
    verify_credits: credits.default(0),
    ...limits,
    features: z.array(FeatureSchema).optional().openapi({ description: "Defaults to email_api and smtp_relay" }),
  })
  .strict()
  .openapi("CreateAccount");

const UpdateAccountSchema = z
  .object({ name: z.string().trim().min(1).max(200).optional(), plan: z.enum(planNames).optional(), ...limits, features: z.array(FeatureSchema).optional() })
  .strict()
  .openapi("UpdateAccount");

const TopUpSchema = z
  .object({ send: credits.optional(), verify: credits.optional(), note: z.string().max(500).optional() })
  .strict()
  .refine((body) => (body.send ?? 0) > 0 || (body.verify ?? 0) > 0, { message: "Give a positive `send` or `verify` amount", ...evenWithFieldErrors })
  .openapi("TopUp");

const createAccount = adminRoute({
  method: "post",
  path: "/accounts",
  summary: "Create an account and its first full-access API key",
  request: { body: jsonBody(CreateAccountSchema) },
  responses: {
    201: jsonResponse(AccountSchema.extend({ api_key: z.string().openapi({ description: "Full-access key, shown only this once" }) }), "The account"),
  },
});

const getAccount = adminRoute({
  method: "get",
  path: "/accounts/{id}",
  summary: "One account",
  request: { params: IdParam("acc") },
  responses: { 200: jsonResponse(AccountSchema, "The account"), 404: errorResponse("No such account") },
});

const updateAccount = adminRoute({
  method: "patch",
  path: "/accounts/{id}",
  summary: "Change plan, limits or features",
  description: "Changing the plan resets the limits to the plan's defaults unless they are given in the same request.",
  request: { params: IdParam("acc"), body: jsonBody(UpdateAccountSchema) },
  responses: { 200: jsonResponse(AccountSchema, "The updated account"), 404: errorResponse("No such account") },
});

const topUp = adminRoute({
  method: "post",
  path: "/accounts/{id}/credits",
  summary: "Add sending and/or verification credits (one ledger entry each)",
  request: { params: IdParam("acc"), body: jsonBody(TopUpSchema) },
  responses: { 200: jsonResponse(AccountSchema, "The account with its new balances"), 404: errorResponse("No such account") },
});

export const adminAccountRoutes = createRouter()
  .openapi(createAccount, async (c) => {
    const body = c.req.valid("json");
    const accountId = newId("acc");
    const key = await generateApiKey("live");
    const db = drizzle(c.env.DB);
    const plan = plans[body.plan];
    await c.env.DB.batch([
      statement(c.env.DB, db.insert(accounts).values({
        id: accountId,
        name: body.name,
        plan: body.plan,
        features: [...new Set(body.features ?? defaultFeatures)],
        dailySendLimit: body.daily_send_limit ?? plan.dailySendLimit,
        rateLimitPerMinute: body.rate_limit_per_minute ?? plan.rateLimitPerMinute,
      })),
      statement(
        c.env.DB,
        db.insert(apiKeys).values({ id: newId("key"), accountId, name: "Default", prefix: key.prefix, keyHash: key.keyHash, scopes: null }),
      ),
      ...(body.send_credits > 0 ? topUpStatements(c.env.DB, accountId, "send", body.send_credits, "initial credits") : []),
      ...(body.verify_credits > 0 ? topUpStatements(c.env.DB, accountId, "verify", body.verify_credits, "initial credits") : []),
    ]);
    const account = await findAccount(db, accountId);
    if (!account) throw notFound("Account");
    return c.json({ ...serializeAccount(account), api_key: key.key }, 201);
  })
  .openapi(getAccount, async (c) => {
    const account = await findAccount(drizzle(c.env.DB), c.req.valid("param").id);
    if (!account) throw notFound("Account");
    return c.json(serializeAccount(account), 200);
  })
  .openapi(updateAccount, async (c) => {
    const body = c.req.valid("json");
    const planDefaults = body.plan ? plans[body.plan] : undefined;
    const row = await drizzle(c.env.DB)
      .update(accounts)
      .set({
        name: body.name,
        plan: body.plan,
        features: body.features ? [...new Set(body.features)] : undefined,
        dailySendLimit: body.daily_send_limit ?? planDefaults?.dailySendLimit,
        rateLimitPerMinute: body.rate_limit_per_minute ?? planDefaults?.rateLimitPerMinute,
        updatedAt: nowIso(),
      })
      .where(eq(accounts.id, c.req.valid("param").id))
      .returning()
      .get();
    if (!row) throw notFound("Account");
    return c.json(serializeAccount(row), 200);
  })
  .openapi(topUp, async (c) => {
    const { id } = c.req.valid("param");
    const body = c.req.valid("json");
    const db = drizzle(c.env.DB);
    if (!(await findAccount(db, id))) throw notFound("Account");
    const note = body.note ?? "operator top-up";
    await c.env.DB.batch([
      ...(body.send ? topUpStatements(c.env.DB, id, "send", body.send, note) : []),
      ...(body.verify ? topUpStatements(c.env.DB, id, "verify", body.verify, note) : []),
    ]);
    const account = await findAccount(db, id);
    if (!account) throw notFound("Account");
    return c.json(serializeAccount(account), 200);
  });
