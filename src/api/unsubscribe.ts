import { Hono } from "hono";
import { html } from "hono/html";
import { config } from "../config";
import { readUnsubscribeToken, unsubscribeRecipient } from "../domain/sending/unsubscribe";
import { dispatchEvents } from "../domain/webhooks/dispatch";
import type { AppEnv } from "../types";

const page = (title: string, body: ReturnType<typeof html>) =>
  html`<!doctype html><html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>${title}</title></head>
<body style="font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem">${body}</body></html>`;

/**
 * `/u/<token>`: the List-Unsubscribe target. GET shows a confirmation button (link scanners must not unsubscribe
 * anyone); POST, the RFC 8058 one-click request mailbox providers send, unsubscribes at once: the address is
 * suppressed and every contact of it becomes `unsubscribed` in the same batch (unsubscribeRecipient).
 */
export const unsubscribeRoutes = new Hono<AppEnv>()
  .get("/u/:token", async (c) => {
    const target = await readUnsubscribeToken(config(c.env), c.req.param("token"));
    if (!target) return c.html(page("Link not valid", html`<h1>This unsubscribe link is not valid.</h1>`), 404);
    return c.html(
      page(
        "Unsubscribe",
        html`<h1>Unsubscribe ${target.email}?</h1>
          <form method="post"><input type="hidden" name="List-Unsubscribe" value="One-Click" /><button type="submit">Unsubscribe</button></form>`,
      ),
    );
  })
  .post("/u/:token", async (c) => {
    const target = await readUnsubscribeToken(config(c.env), c.req.param("token"));
    if (!target) return c.html(page("Link not valid", html`<h1>This unsubscribe link is not valid.</h1>`), 404);
    const done = await unsubscribeRecipient(c.env, target);
    if (!done) return c.html(page("Link not valid", html`<h1>This unsubscribe link is not valid.</h1>`), 404);
    c.executionCtx.waitUntil(dispatchEvents(c.env, done.accountId, [done.dedupeKey]));
    return c.html(page("Unsubscribed", html`<h1>${target.email} is unsubscribed.</h1><p>You will not receive these emails any more.</p>`));
  });
