import { serializeAccount } from "../domain/accounts/accounts";
import { createRouter, jsonResponse, keyedRoute, z } from "../lib/openapi";
import { AccountSchema, BalancesSchema, ScopeSchema } from "./schemas";
import { balancesOf } from "../domain/accounts/accounts";

const MeSchema = AccountSchema.extend({
  api_key: z.object({
    id: z.string(),
    name: z.string(),
    prefix: z.string(),
    mode: z.enum(["live", "test"]),
    scopes: z.array(ScopeSchema).nullable().openapi({ description: "null: full access" }),
  }),
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
  .openapi(getMe, (c) => {
    const { account, apiKey } = c.get("auth");
    return c.json(
      {
        ...serializeAccount(account),
        api_key: { id: apiKey.id, name: apiKey.name, prefix: apiKey.prefix, mode: apiKey.mode, scopes: apiKey.scopes },
      },
      200,
    );
  })
  .openapi(getCredits, (c) => c.json(balancesOf(c.get("auth").account), 200));
