import { Hono } from "hono";
import { config } from "../config";
import { recordClick, recordOpen } from "../domain/tracking/record";
import { readClickToken, readOpenToken } from "../domain/tracking/tokens";
import type { Client } from "../domain/tracking/machine";
import { errorBody } from "../errors";
import { base64ToBytes } from "../lib/crypto";
import type { AppEnv } from "../types";

// A transparent 1×1 GIF (43 bytes).
const pixel = base64ToBytes("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7");
// Every fetch must reach us to be counted, and no shared cache may keep a tracking response.
const noStore = { "Cache-Control": "no-store, no-cache, must-revalidate, private, max-age=0", Pragma: "no-cache" };

const clientOf = (request: Request): Client => ({
  userAgent: request.headers.get("User-Agent"),
  ip: request.headers.get("CF-Connecting-IP"),
});

// The recording starts on a later turn of the event loop: started at once, its work (query building, hashing, a
// local D1) runs on the same thread before the response is written and adds milliseconds to it (scripts/bench/tracking.ts).
const afterResponse = (record: () => Promise<void>) => scheduler.wait(0).then(record);

// Same answer for a forged, altered or wrong-kind token: never a redirect, nothing about any message.
const invalid = { message: "This tracking link is not valid", code: "not_found" } as const;

/**
 * `/t/o/<token>` (open pixel) and `/t/c/<token>` (click redirect), no key: the token is the credential. Both answer
 * from the token alone, then record the hit after the response (`waitUntil`), so a reader never waits on D1.
 */
export const trackingRoutes = new Hono<AppEnv>()
  .get("/t/o/:token", async (c) => {
    const target = await readOpenToken(config(c.env), c.req.param("token"));
    if (!target) return c.json(errorBody(invalid.code, invalid.message), 404, noStore);
    // The time of the fetch, not of its recording, decides whether it came too soon after sending to be a person.
    const client = clientOf(c.req.raw);
    const at = new Date();
    c.executionCtx.waitUntil(afterResponse(() => recordOpen(c.var.ctx, target, client, at)));
    return c.body(pixel, 200, { ...noStore, "Content-Type": "image/gif" });
  })
  .get("/t/c/:token", async (c) => {
    const target = await readClickToken(config(c.env), c.req.param("token"));
    if (!target) return c.json(errorBody(invalid.code, invalid.message), 404, noStore);
    const client = clientOf(c.req.raw);
    c.executionCtx.waitUntil(afterResponse(() => recordClick(c.var.ctx, target, client)));
    return c.body(null, 302, { ...noStore, Location: target.url });
  });
