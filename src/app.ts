import { adminAccountRoutes } from "./admin/accounts";
import { adminDomainRoutes } from "./admin/domains";
import { feedbackRoutes } from "./api/feedback";
import { apiKeyRoutes } from "./api/api-keys";
import { campaignRoutes } from "./api/campaigns";
import { contactRoutes } from "./api/contacts";
import { listRoutes } from "./api/lists";
import { topicRoutes } from "./api/topics";
import { formRoutes } from "./api/forms";
import { subscribeRoutes } from "./api/subscribe";
import { segmentRoutes } from "./api/segments";
import { senderRoutes } from "./api/senders";
import { suppressionRoutes } from "./api/suppressions";
import { domainRoutes } from "./api/domains";
import { inboundFileRoutes, inboundRoutes } from "./api/inbound";
import { messageRoutes } from "./api/messages";
import { sendRoutes } from "./api/send";
import { smtpCredentialRoutes } from "./api/smtp-credentials";
import { templateRoutes } from "./api/templates";
import { unsubscribeRoutes } from "./api/unsubscribe";
import { trackingRoutes } from "./api/tracking";
import { meRoutes } from "./api/me";
import { memberRoutes } from "./api/members";
import { auditLogRoutes } from "./api/audit-log";
import { webhookRoutes } from "./api/webhooks";
import { verifyRoutes } from "./api/verify";
import { reportRoutes } from "./api/reports";
import { usageRoutes } from "./api/usage";
import { aiRoutes } from "./api/ai";
import { automationRoutes } from "./api/automations";
import { hookRoutes } from "./api/hooks";
import { verifyApiRoutes } from "./verify-api";
import { dashboardRoutes } from "./dashboard";
import { postmarkRoutes } from "./compat/postmark/routes";
import { resendRoutes } from "./compat/resend/routes";
import { sendGridRoutes } from "./compat/sendgrid/routes";
import { errorBody, handleError } from "./errors";
import { RELAY_BASE_PATH } from "@mailforge/bridge-contract";
import { relayGate, relayRoutes } from "./internal/bridge-api";
import { createRouter } from "./lib/openapi";
import { adminAuth, apiKeyAuth } from "./middleware/auth";
import { emptyJsonBodyAsObject, requestBodyLimit, requestId } from "./middleware/request";

export const openApiInfo = {
  openapi: "3.1.0",
  info: {
    title: "Mailforge API",
    version: "1.0.0",
    description: "Send and verify email from your own Cloudflare account. Errors are `{message, code, errors?}`; every response has `X-Request-Id`.",
    license: { name: "MIT", identifier: "MIT" },
  },
  servers: [{ url: "/" }],
  tags: [
    { name: "Account", description: "The account behind the key" },
    { name: "API keys", description: "Create, rotate and revoke keys" },
    { name: "Members", description: "The people who sign into the dashboard, their roles and invitations; full-access keys only" },
    { name: "Audit log", description: "Who changed what, when and from where; full-access keys only" },
    { name: "Domains", description: "Sending domains, DKIM keys and DNS verification" },
    {
      name: "Inbound",
      description: "Mail received on your receiving domains (Cloudflare Email Routing): parsed, stored, announced as email.received; scope `inbound`",
    },
    { name: "Sending", description: "POST /send and the messages it creates" },
    { name: "Templates", description: "Stored subjects and bodies with {{placeholders}}" },
    { name: "Webhooks", description: "Signed event deliveries to your endpoints, with retries and a delivery log" },
    { name: "Verification", description: "Single checks and bulk verification jobs (POST /verify, GET /verify/{id})" },
    { name: "Verification API", description: "The standalone verification API: /api/validate and /api/batch/*, key in `?apikey=`, 5 requests/s" },
    { name: "Contacts", description: "Contacts (created or updated by address), custom fields and CSV imports" },
    { name: "Lists", description: "Lists of contacts and their members" },
    { name: "Topics", description: "Subscription topics of broadcast mail: contacts choose them, campaigns name one, unsubscribes leave one" },
    {
      name: "Forms",
      description: "Sign-up forms: a public address to post to (`POST /subscribe/<form id>`, no key), double opt-in, consent records",
    },
    { name: "Segments", description: "Saved audiences: contacts matching conditions on their fields, custom fields and lists" },
    { name: "Senders", description: "The names and addresses (on verified domains) campaigns are sent from" },
    {
      name: "Campaigns",
      description: "Newsletters to lists and segments: drafts, scheduling, reserved credits, one personalised message per contact",
    },
    {
      name: "AI drafts",
      description: "Campaign drafts written by a model from a brief: queued, polled, saved as draft campaigns; nothing is sent by this path",
    },
    { name: "Suppressions", description: "Addresses never mailed again: bounces, complaints, unsubscribes, manual entries" },
    { name: "Reports", description: "Delivery and engagement per day, mailbox provider, sending domain and campaign; usage and credits" },
    {
      name: "SMTP relay",
      description: "Credentials for the SMTP relay (587/2525 STARTTLS, 465 TLS); the relay feeds the same pipeline as POST /send",
    },
    { name: "Automations", description: "Steps run per contact on Cloudflare Workflows, triggered by the API or a private URL" },
    { name: "Operator", description: "Operator API under /admin/v1, authenticated with ADMIN_TOKEN" },
    {
      name: "Resend compatibility",
      description: "What the resend client calls, in Resend's shapes, under /compat/resend (docs/migrating.md); same pipeline as /api/v1",
    },
    {
      name: "Postmark compatibility",
      description: "What the postmark client calls, in Postmark's shapes, under /compat/postmark (docs/migrating.md); same pipeline as /api/v1",
    },
    {
      name: "SendGrid compatibility",
      description: "SendGrid's v3 mail send as @sendgrid/mail calls it, under /compat/sendgrid (docs/migrating.md); same pipeline as /api/v1",
    },
  ],
};

// The API reference: Scalar from this Worker's own static assets (public/api-reference), so it works offline and
// depends on no CDN. Scalar styles its widgets at run time, hence inline styles; scripts, requests, images and fonts
// are this origin's only, so the page cannot reach another host even if the bundle tried.
const apiReferencePage = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Mailforge API reference</title>
  </head>
  <body>
    <div id="app"></div>
    <script src="/api-reference/vendor/scalar.js"></script>
    <script src="/api-reference/init.js"></script>
  </body>
</html>
`;
const apiReferenceHeaders = {
  "Content-Type": "text/html; charset=UTF-8",
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "same-origin",
};

export function createApp() {
  const app = createRouter();
  app.use("*", requestId);
  app.use(`${RELAY_BASE_PATH}/*`, relayGate);
  app.use("*", requestBodyLimit);
  app.onError(handleError);
  app.notFound((c) => c.json(errorBody("not_found", `No route for ${c.req.method} ${c.req.path}`), 404));

  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description: "An API key: `Authorization: Bearer sk_live_…`",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "verifyApiKey", {
    type: "apiKey",
    in: "query",
    name: "apikey",
    description: "An API key with the `verify` scope, on the verification API (/api/validate, /api/batch/*)",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    description: "The operator token (secret ADMIN_TOKEN)",
  });

  app.use("/api/v1/*", async (c, next) => {
    // The reference and its document are public; everything else under /api/v1 needs a key.
    if (c.req.path === "/api/v1/openapi.json" || c.req.path === "/api/v1/docs") return next();
    return apiKeyAuth(c, next);
  });
  app.use("/admin/v1/*", adminAuth);
  app.use("/api/v1/*", emptyJsonBodyAsObject);
  app.use("/admin/v1/*", emptyJsonBodyAsObject);

  app.route("/api/v1", meRoutes);
  app.route("/api/v1", apiKeyRoutes);
  app.route("/api/v1", memberRoutes);
  app.route("/api/v1", auditLogRoutes);
  app.route("/api/v1", contactRoutes);
  app.route("/api/v1", listRoutes);
  app.route("/api/v1", topicRoutes);
  app.route("/api/v1", formRoutes);
  app.route("/api/v1", segmentRoutes);
  app.route("/api/v1", senderRoutes);
  app.route("/api/v1", suppressionRoutes);
  app.route("/api/v1", webhookRoutes);
  app.route("/api/v1", domainRoutes);
  app.route("/api/v1", sendRoutes);
  app.route("/api/v1", smtpCredentialRoutes);
  app.route("/api/v1", messageRoutes);
  app.route("/api/v1", inboundRoutes);
  app.route("/api/v1", templateRoutes);
  app.route("/api/v1", campaignRoutes);
  app.route("/api/v1", aiRoutes);
  app.route("/api/v1", automationRoutes);
  app.route("/", hookRoutes);
  app.route("/", unsubscribeRoutes);
  app.route("/", subscribeRoutes);
  app.route("/", trackingRoutes);
  app.route("/", feedbackRoutes);
  // Signed attachment links of email.received webhooks: no key, outside the OpenAPI document.
  app.route("/", inboundFileRoutes);
  app.route("/api/v1", verifyRoutes);
  app.route("/api/v1", reportRoutes);
  app.route("/api/v1", usageRoutes);
  // The verification API: its own key check (?apikey=) per route, outside the Bearer middleware of /api/v1/*.
  app.route("/api", verifyApiRoutes);
  app.route("/admin/v1", adminAccountRoutes);
  app.route("/admin/v1", adminDomainRoutes);
  // The SMTP bridge's calls: signed with BRIDGE_SECRET, outside the API-key middleware, absent from the OpenAPI document.
  app.route(RELAY_BASE_PATH, relayRoutes);

  // The peers' own clients, unchanged (docs/migrating.md): each surface checks keys and answers errors in its peer's shape.
  app.route("/compat/resend", resendRoutes);
  app.route("/compat/postmark", postmarkRoutes);
  app.route("/compat/sendgrid", sendGridRoutes);

  // The account dashboard (docs/dashboard.md): its own session cookie and CSRF checks, outside the OpenAPI document.
  app.route("/dashboard", dashboardRoutes);
  app.get("/", (c) => c.redirect("/dashboard", 302));

  app.doc31("/api/v1/openapi.json", openApiInfo);
  app.get("/api/v1/docs", (c) => c.body(apiReferencePage, 200, apiReferenceHeaders));
  return app;
}
