// The request bodies of the API keys API, parsed by the API routes and the dashboard's key form alike.

import { z } from "../../lib/schema";
import { scopes } from "../../access";

/** A scope a key can be limited to. */
export const scopeInput = z.enum(scopes).openapi("Scope", {
  description:
    "send: sending, messages, templates, suppressions, SMTP credentials; verify; contacts: contacts and lists; domains; webhooks; " +
    "reports: credits, reports and usage; campaigns: campaigns, senders and segments; automations: automations and their runs; ai: AI campaign drafts; inbound: received mail (GET/DELETE /inbound, raw bytes and attachments).",
});
/** The body of POST /api-keys. */
export const apiKeyInput = z
  .object({
    name: z.string().trim().min(1).max(100),
    scopes: z.array(scopeInput).min(1).max(9).optional().openapi({ description: "Limit the key to these scopes; omit for a full-access key" }),
    mode: z.enum(["live", "test"]).optional().openapi({
      description:
        "`test` keys (sk_test_…) never deliver mail. Default: the mode of the key making the request; a test key can create only test keys",
    }),
  })
  .strict()
  .openapi("CreateApiKey");
