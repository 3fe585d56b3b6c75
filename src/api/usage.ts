import { defaultRange, usageReport } from "../domain/reports/reports";
import { createRouter, jsonResponse, keyedRoute, z } from "../lib/openapi";
import { DateRangeQuery } from "./reports";

const UsageCountsSchema = z.object({
  api_calls: z
    .number()
    .int()
    .openapi({ description: "Requests admitted with the account's API keys; written once a minute, so up to a minute behind" }),
  emails_sent: z.number().int().openapi({ description: "Recipients with a final transport outcome (the reports' `sent`); test mode is not counted" }),
  verifications: z.number().int().openapi({ description: "Addresses verified (single, bulk and the verification API), charged or not" }),
  credits: z
    .object({
      send_charged: z.number().int().openapi({ description: "Sending credits spent (charged at send, or taken from a campaign's reservation)" }),
      send_refunded: z.number().int().openapi({ description: "Sending credits given back (bounced, failed, not queued)" }),
      send_reserved: z.number().int().openapi({ description: "Sending credits reserved by campaigns" }),
      send_released: z.number().int().openapi({ description: "Reserved credits given back unspent" }),
      verify_charged: z.number().int(),
      verify_refunded: z.number().int(),
      verify_granted: z.number().int().openapi({ description: "Verification credits the plan granted for the month (the cron's first run in it)" }),
      verify_expired: z.number().int().openapi({ description: "Last month's granted verification credits left unused, expired with the new grant" }),
    })
    .openapi({ description: "Credit movements, as the ledger records them" }),
});

const UsageSchema = UsageCountsSchema.extend({
  from: z.string().openapi({ example: "2026-11-01" }),
  to: z.string().openapi({ example: "2026-11-30" }),
  daily: z.array(UsageCountsSchema.extend({ date: z.string() })).openapi({ description: "Every day of the range (UTC), zeros included" }),
}).openapi("Usage");

const getUsage = keyedRoute("reports", {
  method: "get",
  path: "/usage",
  tags: ["Reports"],
  summary: "API calls, emails sent, verifications and credits over a date range",
  request: { query: DateRangeQuery },
  responses: { 200: jsonResponse(UsageSchema, "Usage totals and per day") },
});

export const usageRoutes = createRouter().openapi(getUsage, async (c) =>
  c.json(await usageReport(c.var.ctx.db, c.get("auth").account.id, defaultRange(c.req.valid("query"))), 200),
);
