// What a public endpoint (no key: an automation's private URL, a sign-up form) was posted: a JSON object, or a form's
// text fields. Both take a honeypot field that people never see and bots fill in (its name is the forms'
// HONEYPOT_FIELD, which their HTML snippet writes); a request that fills it is answered as usual but not acted on.

import type { Context } from "hono";
import { HONEYPOT_FIELD } from "../domain/forms/forms";
import { validationError } from "../errors";

export type PublicPost = {
  /** The posted fields, the honeypot left out. */
  fields: Record<string, unknown>;
  /** Posted as a form (a browser's form post can be sent on with a redirect), not as JSON. */
  form: boolean;
  honeypot: boolean;
};

const filled = (value: unknown) => typeof value === "string" && value !== "";

/** The posted fields, or undefined when the request carries neither JSON nor a form (a GET, another content type). */
export async function readPublicPost(c: Context): Promise<PublicPost | undefined> {
  if (["GET", "HEAD"].includes(c.req.method)) return undefined;
  const contentType = (c.req.header("Content-Type") ?? "").toLowerCase();
  if (contentType.startsWith("application/json")) {
    let json: unknown;
    try {
      json = await c.req.json();
    } catch {
      throw validationError({ body: ["The body is not valid JSON"] });
    }
    if (json === null || typeof json !== "object" || Array.isArray(json)) throw validationError({ body: ["Send a JSON object"] });
    const { [HONEYPOT_FIELD]: honey, ...fields } = json as Record<string, unknown>;
    return { fields, form: false, honeypot: filled(honey) };
  }
  if (!contentType.startsWith("application/x-www-form-urlencoded") && !contentType.startsWith("multipart/form-data")) return undefined;
  let parsed: Record<string, unknown>;
  try {
    parsed = await c.req.parseBody();
  } catch {
    throw validationError({ body: ["The body is not a valid form"] });
  }
  // Files are not fields of these endpoints: only text values are taken.
  const { [HONEYPOT_FIELD]: honey, ...fields } = Object.fromEntries(Object.entries(parsed).filter(([, value]) => typeof value === "string"));
  return { fields, form: true, honeypot: filled(honey) };
}
