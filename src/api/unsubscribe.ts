import { Hono } from "hono";
import { html } from "hono/html";
import { config } from "../config";
import { preferencesOf, readUnsubscribeToken, unsubscribeCtx, unsubscribeRecipient, type Preferences } from "../domain/sending/unsubscribe";
import { dispatchEvents } from "../domain/webhooks/dispatch";
import type { AppEnv } from "../types";

const page = (title: string, body: ReturnType<typeof html>) =>
  html`<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head>
<body style="font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem">${body}</body></html>`;

const notValid = () => page("Link not valid", html`<h1>This unsubscribe link is not valid.</h1>`);

/** What one click leaves, in the page's words. */
const oneClickWhat = (preferences: Preferences) =>
  preferences.topics.find((topic) => topic.id === preferences.topicId)?.name ?? "all marketing emails";

function preferencePage(preferences: Preferences, notice?: string) {
  return page(
    "Email preferences",
    html`<h1>Email preferences for ${preferences.email}</h1>
      ${notice ? html`<p role="status"><strong>${notice}</strong></p>` : ""}
      <form method="post">
        <input type="hidden" name="List-Unsubscribe" value="One-Click" />
        <button type="submit">Unsubscribe from ${oneClickWhat(preferences)}</button>
      </form>
      <h2>Or choose what you receive</h2>
      <form method="post">
        <input type="hidden" name="preferences" value="1" />
        ${
          preferences.topics.length > 0
            ? html`<fieldset><legend>Topics</legend>
                ${preferences.topics.map(
                  (topic) =>
                    html`<p><label><input type="checkbox" name="topic" value="${topic.id}" ${topic.subscribed ? "checked" : ""} /> ${topic.name}</label>
                      ${topic.description ? html`<br /><small>${topic.description}</small>` : ""}</p>`,
                )}
              </fieldset>`
            : ""
        }
        <p><label><input type="checkbox" name="all" value="1" ${preferences.unsubscribedFromAll ? "checked" : ""} /> Unsubscribe from all marketing emails</label></p>
        <p><small>Receipts, password resets and other emails about your account still reach you.</small></p>
        <button type="submit">Save preferences</button>
      </form>`,
  );
}

/**
 * `/u/<token>`: the List-Unsubscribe target and the recipient's preference page. GET shows the page (link scanners
 * must not unsubscribe anyone): a button that does what one click does, and the account's topics with this address's
 * choices. POST is the RFC 8058 one-click request mailbox providers send (or the button): it leaves the message's
 * topic, or all marketing when it has none; with `preferences=1` it saves the page's choices instead. No scripts.
 * The token names the message's account database (or, made before account databases, nothing): see unsubscribeCtx.
 */
export const unsubscribeRoutes = new Hono<AppEnv>()
  .get("/u/:token", async (c) => {
    const target = await readUnsubscribeToken(config(c.env), c.req.param("token"));
    const ctx = target && (await unsubscribeCtx(c.var.ctx, target));
    const preferences = target && ctx && (await preferencesOf(ctx.db, target));
    if (!preferences) return c.html(notValid(), 404);
    return c.html(preferencePage(preferences));
  })
  .post("/u/:token", async (c) => {
    const target = await readUnsubscribeToken(config(c.env), c.req.param("token"));
    const ctx = target && (await unsubscribeCtx(c.var.ctx, target));
    if (!target || !ctx) return c.html(notValid(), 404);
    const form = await c.req.parseBody({ all: true });
    const picked = new Set(([] as unknown[]).concat(form.topic ?? []).filter((value): value is string => typeof value === "string"));
    const before = form.preferences === "1" ? await preferencesOf(ctx.db, target) : undefined;
    const choice = before
      ? {
          kind: "preferences" as const,
          topics: Object.fromEntries(before.topics.map((topic) => [topic.id, picked.has(topic.id)])),
          allMarketing: form.all === "1",
          before,
        }
      : { kind: "one_click" as const };
    const done = await unsubscribeRecipient(ctx, target, choice);
    if (!done) return c.html(notValid(), 404);
    if (done.dedupeKeys.length > 0) c.executionCtx.waitUntil(dispatchEvents(ctx, done.accountId, done.dedupeKeys));
    const after = await preferencesOf(ctx.db, target);
    if (!after) return c.html(notValid(), 404);
    const notice =
      choice.kind === "preferences"
        ? "Your preferences are saved."
        : `${target.email} is unsubscribed from ${done.left[0]?.topicId ? oneClickWhat({ ...after, topicId: done.left[0].topicId }) : "all marketing emails"}.`;
    return c.html(preferencePage(after, notice));
  });
