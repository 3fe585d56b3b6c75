// The public side of sign-up forms (docs/forms.md), no key: `POST /subscribe/<form id>` takes a website's form post
// (URL-encoded or multipart) or JSON from fetch(), and `/subscribe/confirm/<token>` is the link of the confirmation
// email. A browser's form post is sent on (303) to the form's redirect URL; anything else gets JSON. Every sign-up
// is answered alike whatever becomes of it (suppressed, already subscribed, a bot's), so the endpoint tells nobody
// who is on the list.

import { Hono, type Context } from "hono";
import { html } from "hono/html";
import { cors } from "hono/cors";
import { config } from "../config";
import { contactAddress } from "../domain/contacts/email";
import { verifiedDomainNames } from "../domain/domains/domains";
import { locatePublicForm, type FormRow } from "../domain/forms/forms";
import { readPublicPost } from "../http/public-post";
import { signUpInput } from "../domain/forms/input";
import { confirmationState, confirmSignUp, signUp, type Confirmation } from "../domain/forms/signup";
import { AppError, errorBody, fieldErrors, validationError } from "../errors";
import { sha256Hex } from "../lib/crypto";
import { logError } from "../lib/log";
import type { AppEnv } from "../types";

/** Sign-ups a minute from one IP address: a person, or a handful behind one NAT, never a script's flood. */
export const SIGN_UPS_PER_IP_PER_MINUTE = 20;
/** Sign-ups an hour of one address to one account: each may mail a confirmation, so nobody's inbox can be flooded. */
export const SIGN_UPS_PER_ADDRESS_PER_HOUR = 5;

const pageHeaders = {
  "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-store",
};

const page = (title: string, body: ReturnType<typeof html>) =>
  html`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head>
<body style="font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem">${body}</body></html>`;

const clientIp = (c: Context<AppEnv>) => c.req.header("CF-Connecting-IP") ?? null;

function rateLimited(retryAfterSeconds: number, message: string): AppError {
  return new AppError("rate_limited", message, { headers: { "Retry-After": String(retryAfterSeconds) } });
}

/**
 * CORS for the pages of the account's own verified domains (the domain or any subdomain, http or https), so a site
 * can post with fetch() and read the answer. A plain form post needs no CORS and is taken from anywhere.
 */
async function allowedOrigin(origin: string, c: Context<AppEnv>): Promise<string | null> {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return null;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return null;
  const formId = c.req.param("formId") ?? "";
  const form = formId.length <= 64 ? (await locatePublicForm(c.var.ctx, c.req.query("db"), formId))?.form : undefined;
  if (!form) return null;
  const labels = url.hostname.toLowerCase().split(".");
  const names = labels.map((_, index) => labels.slice(index).join(".")).filter((name) => name.includes("."));
  return (await verifiedDomainNames(c.var.ctx.shared, form.accountId, names)).size > 0 ? origin : null;
}

/** What a sign-up form posted: JSON or a form, nothing else (a form post from a browser gets a page or a redirect). */
async function readPost(c: Context<AppEnv>) {
  const posted = await readPublicPost(c);
  if (!posted) throw validationError({ body: ["Send the fields as a form (application/x-www-form-urlencoded or multipart/form-data) or as JSON"] });
  return { ...posted, browser: posted.form && (c.req.header("Accept") ?? "").includes("text/html") };
}

/** The one answer every sign-up gets. */
function accepted(c: Context<AppEnv>, form: FormRow, browser: boolean) {
  const message = form.doubleOptIn
    ? "Almost done: check your inbox for an email with a link to confirm your subscription."
    : "Thank you for subscribing.";
  if (browser && form.redirectUrl) return c.redirect(form.redirectUrl, 303);
  if (browser) return c.html(page("Thank you", html`<h1>Thank you</h1><p>${message}</p>`), 200, pageHeaders);
  return c.json({ status: "accepted" as const, double_opt_in: form.doubleOptIn, message }, 202);
}

const confirmationPages: Record<Exclude<Confirmation["kind"], "ready" | "confirmed">, { status: 200 | 404 | 410; title: string; text: string }> = {
  invalid: {
    status: 404,
    title: "Link not valid",
    text: "This confirmation link is not valid. Copy the whole link from the email, or sign up again.",
  },
  expired: { status: 410, title: "Link expired", text: "This confirmation link has expired. Sign up again to get a new one." },
  already_confirmed: { status: 200, title: "Already confirmed", text: "This subscription is already confirmed. Nothing more to do." },
};

function confirmationPage(c: Context<AppEnv>, state: Confirmation) {
  if (state.kind === "ready") {
    // Mail scanners follow links: only this button, a POST, confirms.
    return c.html(
      page(
        "Confirm your subscription",
        html`<h1>Confirm your subscription</h1><p>Subscribe <strong>${state.email}</strong>?</p>
          <form method="post"><button type="submit">Confirm my subscription</button></form>`,
      ),
      200,
      pageHeaders,
    );
  }
  if (state.kind === "confirmed") {
    const text = state.subscribed
      ? html`<strong>${state.email}</strong> is subscribed. Thank you!`
      : html`Your confirmation is recorded, but <strong>${state.email}</strong> cannot receive these emails: mail to it bounced or was reported as spam.`;
    return c.html(page("Subscription confirmed", html`<h1>Subscription confirmed</h1><p>${text}</p>`), 200, pageHeaders);
  }
  const { status, title, text } = confirmationPages[state.kind];
  return c.html(page(title, html`<h1>${title}</h1><p>${text}</p>`), status, pageHeaders);
}

export const subscribeRoutes = new Hono<AppEnv>();

subscribeRoutes.use(
  "/subscribe/:formId",
  cors({ origin: allowedOrigin, allowMethods: ["POST"], allowHeaders: ["Content-Type"], exposeHeaders: ["Retry-After"], maxAge: 600 }),
);

subscribeRoutes.post("/subscribe/:formId", async (c) => {
  const ip = clientIp(c);
  const perIp = await c.env.RATE_LIMITER.getByName(`subscribe-ip:${ip ?? "unknown"}`).consume(SIGN_UPS_PER_IP_PER_MINUTE, 60);
  if (!perIp.allowed) throw rateLimited(perIp.retryAfterSeconds, "Too many sign-ups from this address; try again shortly");
  const formId = c.req.param("formId");
  // In the database the address's `db` names, else in the others (an address made before account databases).
  const located = formId.length <= 64 ? await locatePublicForm(c.var.ctx, c.req.query("db"), formId) : undefined;
  if (!located) return c.json(errorBody("not_found", "No form at this address"), 404);
  const { form, ctx } = located;

  const posted = await readPost(c);
  // Answered exactly like a sign-up, so the bot learns nothing; nothing is kept or sent.
  if (posted.honeypot) return accepted(c, form, posted.browser);
  const taken = Object.fromEntries(Object.entries(posted.fields).filter(([name]) => name === "email" || form.fields.includes(name)));
  const parsed = signUpInput.safeParse(taken);
  if (!parsed.success) throw validationError(fieldErrors(parsed.error));
  const { email, ...fields } = parsed.data;
  const address = contactAddress(email);
  if ("error" in address) throw validationError({ email: [address.error] });

  const bucket = await sha256Hex(`${form.accountId}:${address.key}`);
  const perAddress = await c.env.RATE_LIMITER.getByName(`subscribe-address:${bucket}`).consume(SIGN_UPS_PER_ADDRESS_PER_HOUR, 3600);
  if (!perAddress.allowed) throw rateLimited(perAddress.retryAfterSeconds, "Too many sign-ups of this email address; try again later");

  const outcome = await signUp(ctx, config(c.env), { form, address, fields, ip });
  if (outcome.kind === "not_sent") {
    // The account's doing (its sender, domain or credits), not the visitor's: logged for the operator.
    logError("form confirmation not sent", { form_id: form.id, account_id: form.accountId, reason: outcome.reason, request_id: c.get("requestId") });
    throw new AppError("upstream_unavailable", "The sign-up cannot be completed right now; try again later");
  }
  return accepted(c, form, posted.browser);
});

subscribeRoutes.get("/subscribe/confirm/:token", async (c) => {
  return confirmationPage(c, await confirmationState(c.var.ctx, config(c.env), c.req.param("token")));
});

subscribeRoutes.post("/subscribe/confirm/:token", async (c) => {
  return confirmationPage(c, await confirmSignUp(c.var.ctx, config(c.env), c.req.param("token"), clientIp(c)));
});
