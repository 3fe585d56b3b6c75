// `{base}/compat/sendgrid`: SendGrid's v3 mail send, as @sendgrid/mail calls it. Point the client here with
// `sgMail.client.setDefaultRequest("baseUrl", "<base>/compat/sendgrid")` after setApiKey; the key is a Mailforge API
// key (an `SG.` in front of it is ignored, so the client's prefix warning can be silenced). docs/migrating.md.

import { findTemplateByIdOrName } from "../../domain/templates/templates";
import { validationError } from "../../errors";
import { createRouter, jsonBody, jsonResponse } from "../../lib/openapi";
import { bearerToken } from "../../middleware/auth";
import { compatBodyLimit } from "../../middleware/request";
import { acceptSends, checkSendRequests, indexedErrors, PeerError, peerErrorHandler, peerKeyAuth, peerRoute } from "../shared";
import { renderSendGridError, SendGridErrorSchema, SendGridMailSchema, toSendRequests } from "./translate";

const mailSend = peerRoute(
  "send",
  {
    method: "post",
    path: "/v3/mail/send",
    tags: ["SendGrid compatibility"],
    summary: "Send mail (SendGrid's v3 POST /mail/send)",
    description:
      "Each personalization is one message (its own to, cc, bcc, subject, dynamic_template_data, custom_args, send_at), all sent together " +
      "through the same pipeline as POST /api/v1/send/batch, all or none. `categories` become tags, `custom_args` metadata, `template_id` " +
      "a Mailforge template's id or name. `X-Message-Id` is the first message's id; `X-Mailforge-Message-Ids` lists every message's.",
    request: { body: jsonBody(SendGridMailSchema) },
    responses: { 202: { description: "Accepted; no body" } },
  },
  {
    security: { apiKey: [] },
    errors: jsonResponse(SendGridErrorSchema, "An error as SendGrid gives it: `{errors: [{message, field, help}]}`"),
    features: ["email_api", "smtp_relay"],
  },
);

export const sendGridRoutes = createRouter();
sendGridRoutes.onError(peerErrorHandler(renderSendGridError));
sendGridRoutes.use("*", compatBodyLimit);
sendGridRoutes.use(
  "*",
  peerKeyAuth({
    keyOf: (c) => bearerToken(c.req.header("Authorization"))?.replace(/^SG\./, ""),
    missing: () => new PeerError("unauthorized", "Permission denied, wrong credentials"),
    invalid: () => new PeerError("unauthorized", "The provided authorization grant is invalid, expired, or revoked"),
    cachedRoute: (method, path) => method === "POST" && path.endsWith("/v3/mail/send"),
  }),
);

sendGridRoutes.openapi(mailSend, async (c) => {
  const mail = c.req.valid("json");
  let templateId: string | undefined;
  if (mail.template_id !== undefined) {
    const template = await findTemplateByIdOrName(c.var.ctx.db, c.get("auth").account.id, mail.template_id);
    if (!template)
      throw new PeerError("validation_failed", "The template_id must be a valid template ID or name", "template_id", {
        errors: { template_id: [`No template ${mail.template_id}`] },
      });
    templateId = template.id;
  }
  const { requests, errors } = checkSendRequests(toSendRequests(mail, templateId));
  // Keyed by personalization, as the batch's own errors are, so each names its personalization.
  if (errors.size > 0) throw validationError(indexedErrors(errors));
  const { accepted } = await acceptSends(c, requests, { batch: true });
  c.header("X-Message-Id", accepted[0]!.id);
  c.header("X-Mailforge-Message-Ids", accepted.map((message) => message.id).join(","));
  return c.body(null, 202);
});

// The rest of SendGrid's v3 API (marketing, stats, suppressions, …) is answered in its shape.
sendGridRoutes.all("*", (c) => {
  throw new PeerError("not_found", `${c.req.method} ${c.req.path} is not supported by Mailforge's SendGrid compatibility (docs/migrating.md)`);
});
