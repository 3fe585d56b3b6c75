// The account dashboard under /dashboard: server-rendered pages over the same domain functions the API routes call.
// Sessions and CSRF live in ./session.ts; the pages in ./pages/. A page a key's scopes do not cover answers 403.

import { Hono, type Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { Feature } from "../access";
import type { AreaName } from "../domain/accounts/roles";
import { perKeyLimiter } from "../middleware/auth";
import { accountMovingRetryAfterSeconds, AppError } from "../errors";
import { isPausedForMove } from "../domain/accounts/move";
import { logError } from "../lib/log";
import { recordDashboardChange } from "../middleware/audit";
import { dashboardBodyLimit, requestCtx } from "../middleware/request";
import { describeErrors, section } from "./guard";
import { Notice, Shell } from "./layout";
import { aiPages } from "./pages/ai";
import { apiKeyPages } from "./pages/api-keys";
import { auditLogPages } from "./pages/audit-log";
import { automationPages } from "./pages/automations/routes";
import { campaignPages } from "./pages/campaigns/routes";
import { contactPages } from "./pages/contacts/routes";
import { domainPages } from "./pages/domains";
import { formPages } from "./pages/forms";
import { domainReceivingPages, inboundPages } from "./pages/inbound";
import { memberPages } from "./pages/members";
import { messagePages } from "./pages/messages";
import { overviewPages } from "./pages/overview";
import { securityPages } from "./pages/security";
import { segmentPages } from "./pages/segments";
import { smtpCredentialPages } from "./pages/smtp-credentials";
import { templatePages } from "./pages/templates";
import { suppressionPages, topicPages } from "./pages/topics";
import { usagePages } from "./pages/usage";
import { verificationPages } from "./pages/verification";
import { webhookPages } from "./pages/webhooks";
import { csrfMatches, csrfTokenOf, endSession, readSession, type DashboardEnv } from "./session";
import { signInPages, signInPath } from "./sign-in";

// Pages load only their own scripts and styles; no inline script, no framing, nothing cached by shared caches.
const securityHeaders = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "same-origin",
  "Cache-Control": "no-store",
};

const isHtmx = (c: Context) => c.req.header("HX-Request") === "true";

export const dashboardRoutes = new Hono<DashboardEnv>();

dashboardRoutes.use("*", async (c, next) => {
  await next();
  // A page may set its own (the campaign preview frames the campaign's HTML under a stricter policy).
  for (const [name, value] of Object.entries(securityHeaders)) if (!c.res.headers.has(name)) c.res.headers.set(name, value);
});

// Before anything reads the body (the CSRF check parses the form).
dashboardRoutes.use("*", dashboardBodyLimit);

dashboardRoutes.onError((error, c) => {
  const status = error instanceof HTTPException ? error.status : 500;
  if (status >= 500) logError("dashboard.error", { path: c.req.path, error: String(error) });
  // A refusal reads as the API's: its message, then each field's problems (the API's 422 `errors`).
  const details = error instanceof AppError && error.errors ? `: ${describeErrors(error.errors)}` : "";
  const message = status >= 500 ? "Something went wrong on our side; try again." : `${error.message}${details}`;
  if (isHtmx(c)) return c.html(<Notice kind="error">{message}</Notice>, status);
  const auth = c.get("auth") as DashboardEnv["Variables"]["auth"] | undefined;
  return c.html(
    <Shell title={status === 404 ? "Not found" : status === 403 ? "Not allowed" : "Error"} auth={auth} csrfToken={c.get("csrfToken")}>
      <Notice kind="error">{message}</Notice>
      <p>
        <a href="/dashboard">Back to the dashboard</a>
      </p>
    </Shell>,
    status,
  );
});

// Signing in comes before the session check below (its forms have no session yet).
dashboardRoutes.route("/", signInPages);

/** A refused request: a fragment for htmx to show in place, else a page (the refused form's data is not echoed). */
function refusal(c: Context<DashboardEnv>, message: string, status: 401 | 403 | 429 | 503) {
  if (isHtmx(c)) return c.html(<Notice kind="error">{message}</Notice>, status);
  return c.html(
    <Shell title={status === 401 ? "Signed out" : status === 429 ? "Slow down" : status === 503 ? "Try again shortly" : "Not allowed"}>
      <Notice kind="error">{message}</Notice>
      <p>
        <a href={signInPath}>Sign in</a>
      </p>
    </Shell>,
    status,
  );
}

// Everything below needs a session; non-GET requests also need the session's CSRF token.
dashboardRoutes.use("*", async (c, next) => {
  const session = await readSession(c);
  if (!session) {
    if (c.req.method === "GET" && !isHtmx(c)) return c.redirect(signInPath, 303);
    if (isHtmx(c)) c.header("HX-Redirect", signInPath);
    return refusal(c, "Your session ended; sign in again.", 401);
  }
  c.set("auth", session.auth);
  c.set("ctx", requestCtx(c, session.auth.account));
  c.set("csrfToken", session.csrfToken);
  const { member, account } = session.auth;
  if (member && account.requireTotp && !member.totp && !c.req.path.startsWith("/dashboard/security") && c.req.path !== "/dashboard/sign-out") {
    // The owner requires a second factor: a member without one sets it up before anything else.
    if (c.req.method === "GET" && !isHtmx(c)) return c.redirect("/dashboard/security", 303);
    return refusal(c, "This account requires a second factor: set one up on the Security page first.", 403);
  }
  if (c.req.method !== "GET" && c.req.method !== "HEAD" && !(await csrfMatches(await csrfTokenOf(c), session.csrfToken))) {
    return refusal(c, "The form is missing its security token; reload the page and try again.", 403);
  }
  if (c.req.method !== "GET" && c.req.method !== "HEAD" && c.req.path !== "/dashboard/sign-out") {
    if (isPausedForMove(account)) {
      // The session's account row is read on every request, so the pause holds from the moment it is set.
      c.header("Retry-After", String(accountMovingRetryAfterSeconds));
      return refusal(c, `The operator is moving this account's data; changes are paused. Try again in ${accountMovingRetryAfterSeconds} s.`, 503);
    }
    // An action here does what an API call with the same key would: it spends the same per-minute budget, so the
    // dashboard is no way around the key's rate limit (pages, polls and signing out are not counted). It is not an
    // API call in the account's usage, though: no account id for the limiter to count it under.
    const limiter = perKeyLimiter(session.auth);
    const decision = await c.env.RATE_LIMITER.getByName(limiter.name).consume(limiter.limit, limiter.windowSeconds);
    if (!decision.allowed) {
      c.header("Retry-After", String(decision.retryAfterSeconds));
      return refusal(c, `Too many actions: this key's limit is ${decision.limit} a minute. Try again in ${decision.retryAfterSeconds} s.`, 429);
    }
    await next();
    await recordDashboardChange(c, session.auth);
    return;
  }
  await next();
});

dashboardRoutes.post("/sign-out", async (c) => {
  await endSession(c);
  return c.redirect(signInPath, 303);
});

// Each section's area, and the plan features its API routes require, named once: section() checks them before every
// route's handler. The Security page is every member's own (a key session has none), so it names no area.
const sections: [Hono<DashboardEnv>, AreaName, ...Feature[]][] = [
  [overviewPages, "reports"],
  [messagePages, "send"],
  [domainReceivingPages, "domains"],
  [inboundPages, "inbound"],
  [domainPages, "domains"],
  [apiKeyPages, "api_keys"],
  [smtpCredentialPages, "send"],
  [webhookPages, "webhooks"],
  [verificationPages, "verify"],
  // Before contactPages, whose /contacts/:id would take /contacts/topics, /contacts/suppressions and /contacts/forms
  // for contact ids.
  [topicPages, "contacts"],
  [suppressionPages, "suppressions"],
  [formPages, "contacts"],
  [contactPages, "contacts"],
  [campaignPages, "campaigns", "campaigns"],
  [templatePages, "templates"],
  [segmentPages, "contacts"],
  [automationPages, "automations", "automations"],
  [aiPages, "ai", "ai", "campaigns"],
  [usagePages, "reports"],
  [memberPages, "members"],
  [auditLogPages, "audit_log"],
];
for (const [pages, area, ...features] of sections) dashboardRoutes.route("/", section(pages, area, ...features));
dashboardRoutes.route("/", securityPages);

dashboardRoutes.all("*", () => {
  throw new AppError("not_found", "There is no such page");
});
