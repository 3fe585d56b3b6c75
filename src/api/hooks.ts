// The private URL of an automation: `ANY /hooks/automations/<path>`, no key (the unguessable path is the
// credential), so a website's signup form can post straight to it. Takes the trigger fields from a JSON body, a form
// (urlencoded or multipart) or the query string; answers 202 JSON, or 303 to the automation's redirect_url when a
// browser submitted a form. Rate limited per path.

import { Hono, type Context } from "hono";
import { cors } from "hono/cors";
import { findAccount, hasFeature } from "../domain/accounts/accounts";
import { findAutomationByPath, privatePathOf } from "../domain/automations/automations";
import { findInAccountDatabases, inDatabase } from "../db/client";
import { hintedDatabase } from "../db/hints";
import { contactTextFields } from "../domain/contacts/contacts";
import { AppError, errorBody, fieldErrors, validationError } from "../errors";
import { newId } from "../lib/ids";
import { readPublicPost } from "../http/public-post";
import { HONEYPOT_FIELD } from "../domain/forms/forms";
import type { AppEnv } from "../types";
import { automationTriggerInput } from "../domain/automations/input";
import { trigger } from "./automations";

/** Triggers per minute per private path: a signup form's traffic, not a flood. */
const HOOK_RATE_PER_MINUTE = 60;
const known = new Set<string>(["email", "event_id", ...contactTextFields]);

/** Form and query fields as the trigger takes them: known fields as they are, any other field a custom field. */
function fromFields(fields: Record<string, string>): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const custom: Record<string, string> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (key.startsWith("_")) continue;
    if (known.has(key)) body[key] = value;
    else custom[key] = value;
  }
  return Object.keys(custom).length > 0 ? { ...body, custom_fields: custom } : body;
}

/** The trigger's input: the query's fields, and a JSON object or a form's fields over them. */
async function readInput(c: Context<AppEnv>): Promise<{ input: Record<string, unknown>; form: boolean; honeypot: boolean }> {
  const query = c.req.query();
  const posted = await readPublicPost(c);
  // A GET carries its fields, the honeypot too, in the query.
  if (!posted) return { input: fromFields(query), form: false, honeypot: (query[HONEYPOT_FIELD] ?? "") !== "" };
  const input = posted.form ? fromFields({ ...query, ...(posted.fields as Record<string, string>) }) : { ...fromFields(query), ...posted.fields };
  return { input, form: posted.form, honeypot: posted.honeypot };
}

export const hookRoutes = new Hono<AppEnv>();
// Browser forms and fetch() from any site may call it; no cookies or credentials are involved.
hookRoutes.use("/hooks/automations/*", cors({ origin: "*", allowMethods: ["GET", "POST", "PUT", "PATCH"], allowHeaders: ["Content-Type"] }));
hookRoutes.all("/hooks/automations/:path", async (c) => {
  const segment = c.req.param("path");
  if (segment.length > 100) return c.json(errorBody("not_found", "No automation at this URL"), 404);
  const { tag, path } = privatePathOf(segment);
  const decision = await c.env.RATE_LIMITER.getByName(`hook:${path}`).consume(HOOK_RATE_PER_MINUTE, 60);
  if (!decision.allowed) {
    throw new AppError("rate_limited", "Too many triggers for this automation; try again shortly", {
      headers: { "Retry-After": String(decision.retryAfterSeconds) },
    });
  }
  // In the database the URL's tag names, else in the others (a URL made before account databases, or before a move).
  const found = await findInAccountDatabases(
    c.env,
    hintedDatabase(c.env, tag),
    (db) => findAutomationByPath(db, path),
    (automation) => automation.accountId,
  );
  if (!found) return c.json(errorBody("not_found", "No automation at this URL"), 404);
  const automation = found.found;
  const ctx = inDatabase(c.var.ctx, found.database);
  // The operator may have taken the feature away since the automation was made.
  const account = await findAccount(c.var.ctx.shared, automation.accountId);
  if (!account || !hasFeature(account, "automations")) throw new AppError("feature_disabled", "Automations are not enabled for this account");
  const { input, form, honeypot } = await readInput(c);
  const browserForm = form && (c.req.header("Accept") ?? "").includes("text/html");
  if (honeypot) {
    // Answered exactly like a success (an id that names no run) so the bot learns nothing; nothing runs.
    return browserForm && automation.redirectUrl
      ? c.redirect(automation.redirectUrl, 303)
      : c.json({ run_id: newId("run"), status: "running", created: true }, 202);
  }
  const parsed = automationTriggerInput.safeParse(input);
  if (!parsed.success) throw validationError(fieldErrors(parsed.error));
  const result = await trigger(ctx, automation, parsed.data);
  if (browserForm && automation.redirectUrl) return c.redirect(automation.redirectUrl, 303);
  return c.json(result.body, result.status === 200 ? 200 : 202);
});
