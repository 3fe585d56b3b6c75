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
    c.executionCtx.waitUntil(recordOpen(c.env, target, clientOf(c.req.raw)));
    return c.body(pixel, 200, { ...noStore, "Content-Type": "image/gif" });
  })
  .get("/t/c/:token", async (c) => {
    const target = await readClickToken(config(c.env), c.req.param("token"));
    if (!target) return c.json(errorBody(invalid.code, invalid.message), 404, noStore);
    c.executionCtx.waitUntil(recordClick(c.env, target, clientOf(c.req.raw)));
    return c.body(null, 302, { ...noStore, Location: target.url });
  });
