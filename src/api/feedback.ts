// POST /feedback/ses: Amazon SES notifications through SNS (src/domain/feedback/ses.ts). No API key: SNS cannot send
// one; the topic allowlist and the SNS signature are the credentials. SNS posts JSON as text/plain.

import { Hono } from "hono";
import { handleSesNotification } from "../domain/feedback/ses";
import { AppError } from "../errors";
import type { AppEnv } from "../types";

export const feedbackRoutes = new Hono<AppEnv>().post("/feedback/ses", async (c) => {
  let body: unknown;
  try {
    body = JSON.parse(await c.req.text());
  } catch {
    throw new AppError("validation_failed", "The body is not JSON");
  }
  const outcome = await handleSesNotification(c.var.ctx, body);
  switch (outcome.kind) {
    case "invalid":
      throw new AppError("validation_failed", outcome.reason);
    case "forbidden":
      throw new AppError("forbidden", outcome.reason);
    case "confirmed":
      return c.json({ status: "subscription confirmed" }, 200);
    case "ignored":
      return c.json({ status: "ignored", reason: outcome.reason }, 200);
    case "recorded":
      return c.json({ status: "recorded", recorded: outcome.recorded, ignored: outcome.ignored }, 200);
  }
});
