import { createApiKey, listApiKeys, revokeApiKey, rotateApiKey, serializeApiKey } from "../domain/accounts/api-keys";
import { apiKeyInput } from "../domain/accounts/input";
import { AppError, notFound } from "../errors";
import { createRouter, IdParam, jsonBody, jsonResponse, keyedRoute, errorResponse, z } from "../lib/openapi";
import { ApiKeySchema, CreatedApiKeySchema } from "./schemas";

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
  request: { body: jsonBody(apiKeyInput) },
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
    const rows = await listApiKeys(c.var.ctx.shared, c.get("auth").account.id);
    return c.json({ data: rows.map(serializeApiKey) }, 200);
  })
  .openapi(createKey, async (c) => {
    const outcome = await createApiKey(c.var.ctx.shared, c.get("auth"), c.req.valid("json"));
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.json({ ...serializeApiKey(outcome.row), key: outcome.key }, 201);
  })
  .openapi(rotateKey, async (c) => {
    const outcome = await rotateApiKey(c.var.ctx.shared, c.get("auth"), c.req.valid("param").id);
    if (outcome.kind === "not_found") throw notFound("API key");
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.json({ ...serializeApiKey(outcome.row), key: outcome.key }, 200);
  })
  .openapi(revokeKey, async (c) => {
    const outcome = await revokeApiKey(c.var.ctx.shared, c.get("auth"), c.req.valid("param").id);
    if (outcome.kind === "not_found") throw notFound("API key");
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.json({ ...serializeApiKey(outcome.row), revoked_at: outcome.row.revokedAt }, 200);
  });
