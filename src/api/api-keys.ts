import { and, desc, eq, isNull } from "drizzle-orm";
import { drizzle } from "drizzle-orm/d1";
import { apiKeys } from "../db/schema";
import { assertLiveCaller, generateApiKey, grantedMode, serializeApiKey } from "../domain/accounts/api-keys";
import { notFound } from "../errors";
import { newId, nowIso } from "../lib/ids";
import { createRouter, IdParam, jsonBody, jsonResponse, keyedRoute, errorResponse, z } from "../lib/openapi";
import { ApiKeySchema, CreatedApiKeySchema, ScopeSchema } from "./schemas";

const CreateApiKeySchema = z
  .object({
    name: z.string().trim().min(1).max(100),
    scopes: z
      .array(ScopeSchema)
      .min(1)
      .max(9)
      .optional()
      .openapi({ description: "Limit the key to these scopes; omit for a full-access key" }),
    mode: z.enum(["live", "test"]).optional().openapi({
      description: "`test` keys (sk_test_…) never deliver mail. Default: the mode of the key making the request; a test key can create only test keys",
    }),
  })
  .strict()
  .openapi("CreateApiKey");

const listKeys = keyedRoute("full_access", {
  method: "get",
  path: "/api-keys",
  tags: ["API keys"],
  summary: "List API keys (never the secrets)",
  responses: { 200: jsonResponse(z.object({ data: z.array(ApiKeySchema) }), "Active keys, newest first") },
});

const createKey = keyedRoute("full_access", {
  method: "post",
  path: "/api-keys",
  tags: ["API keys"],
  summary: "Create an API key",
  request: { body: jsonBody(CreateApiKeySchema) },
  responses: {
    201: jsonResponse(CreatedApiKeySchema, "The key; `key` is shown only this once"),
    403: errorResponse("`live_key_required`: a test key asked for a live key"),
  },
});

const rotateKey = keyedRoute("full_access", {
  method: "post",
  path: "/api-keys/{id}/rotate",
  tags: ["API keys"],
  summary: "Replace a key's secret; the old secret stops working at once",
  description: "The key keeps its mode. A test key may rotate only test keys.",
  request: { params: IdParam("key") },
  responses: {
    200: jsonResponse(CreatedApiKeySchema, "The key with its new secret in `key`"),
    403: errorResponse("`live_key_required`: a test key tried to rotate a live key"),
    404: errorResponse("No such key"),
  },
});

const revokeKey = keyedRoute("full_access", {
  method: "delete",
  path: "/api-keys/{id}",
  tags: ["API keys"],
  summary: "Revoke a key",
  description: "A test key may revoke only test keys.",
  request: { params: IdParam("key") },
  responses: {
    200: jsonResponse(ApiKeySchema.extend({ revoked_at: z.string() }), "The revoked key"),
    403: errorResponse("`live_key_required`: a test key tried to revoke a live key"),
    404: errorResponse("No such key"),
  },
});

export const apiKeyRoutes = createRouter()
  .openapi(listKeys, async (c) => {
    const rows = await drizzle(c.env.DB)
      .select()
      .from(apiKeys)
      .where(and(eq(apiKeys.accountId, c.get("auth").account.id), isNull(apiKeys.revokedAt)))
      .orderBy(desc(apiKeys.createdAt), desc(apiKeys.id))
      .all();
    return c.json({ data: rows.map(serializeApiKey) }, 200);
  })
  .openapi(createKey, async (c) => {
    const body = c.req.valid("json");
    const mode = grantedMode(c.get("auth").apiKey, body.mode, "key");
    const secret = await generateApiKey(mode);
    const row = await drizzle(c.env.DB)
      .insert(apiKeys)
      .values({
        id: newId("key"),
        accountId: c.get("auth").account.id,
        name: body.name,
        prefix: secret.prefix,
        keyHash: secret.keyHash,
        scopes: body.scopes ? [...new Set(body.scopes)] : null,
        mode,
      })
      .returning()
      .get();
    return c.json({ ...serializeApiKey(row), key: secret.key }, 201);
  })
  .openapi(rotateKey, async (c) => {
    const db = drizzle(c.env.DB);
    const where = and(eq(apiKeys.id, c.req.valid("param").id), eq(apiKeys.accountId, c.get("auth").account.id), isNull(apiKeys.revokedAt));
    const current = await db.select({ mode: apiKeys.mode }).from(apiKeys).where(where).get();
    if (!current) throw notFound("API key");
    // the new secret has the key's mode, so a test key rotating a live key would be handed a live secret
    if (current.mode === "live") assertLiveCaller(c.get("auth").apiKey, "rotate a live key");
    const secret = await generateApiKey(current.mode);
    const row = await db.update(apiKeys).set({ keyHash: secret.keyHash, prefix: secret.prefix }).where(where).returning().get();
    if (!row) throw notFound("API key");
    return c.json({ ...serializeApiKey(row), key: secret.key }, 200);
  })
  .openapi(revokeKey, async (c) => {
    const db = drizzle(c.env.DB);
    const { account, apiKey } = c.get("auth");
    const where = and(eq(apiKeys.id, c.req.valid("param").id), eq(apiKeys.accountId, account.id), isNull(apiKeys.revokedAt));
    // a leaked test key must not be able to take production down by revoking its live keys
    if (apiKey.mode === "test") {
      const target = await db.select({ mode: apiKeys.mode }).from(apiKeys).where(where).get();
      if (target?.mode === "live") assertLiveCaller(apiKey, "revoke a live key");
    }
    const row = await db.update(apiKeys).set({ revokedAt: nowIso() }).where(where).returning().get();
    if (!row) throw notFound("API key");
    return c.json({ ...serializeApiKey(row), revoked_at: row.revokedAt ?? nowIso() }, 200);
  });
