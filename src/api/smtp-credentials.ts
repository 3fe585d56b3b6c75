import { createSmtpCredential, listSmtpCredentials, revokeSmtpCredential, serializeSmtpCredential } from "../domain/smtp/credentials";
import { smtpCredentialInput } from "../domain/smtp/input";
import { AppError, notFound } from "../errors";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, Timestamp, z } from "../lib/openapi";

export const SmtpCredentialSchema = z
  .object({
    id: z.string().openapi({ example: "smtp_3kT9dQ0aZ1mL7pX2cV5bN8" }),
    name: z.string(),
    username: z.string().openapi({ example: "smtp_Qm2f8ZkT0aLx4Vb7Nc1R", description: "The SMTP username (AUTH PLAIN/LOGIN)" }),
    mode: z.enum(["live", "test"]).openapi({ description: "`test`: messages through this credential are simulated, never delivered" }),
    created_at: Timestamp,
    last_used_at: Timestamp.nullable(),
  })
  .openapi("SmtpCredential");

const CreatedSmtpCredentialSchema = SmtpCredentialSchema.extend({
  password: z.string().openapi({ description: "The SMTP password. Shown only in this response; store it now.", example: "…" }),
}).openapi("CreatedSmtpCredential");

const tags = ["SMTP relay"];

const listCredentials = keyedRoute("send", {
  method: "get",
  path: "/smtp-credentials",
  tags,
  summary: "List SMTP credentials (never the passwords)",
  responses: { 200: jsonResponse(z.object({ data: z.array(SmtpCredentialSchema) }), "Active credentials, newest first") },
});

const createCredential = keyedRoute(
  "send",
  {
    method: "post",
    path: "/smtp-credentials",
    tags,
    summary: "Create an SMTP credential",
    description:
      "A username and password for the SMTP relay (ports 587 and 2525 with STARTTLS, 465 with implicit TLS). The password is shown only in this response and stored as a hash.",
    request: { body: jsonBody(smtpCredentialInput) },
    responses: {
      201: jsonResponse(CreatedSmtpCredentialSchema, "The credential; `password` is shown only this once"),
      403: errorResponse("`live_key_required`: a test key asked for a live credential; `feature_disabled`: no SMTP relay"),
    },
  },
  { features: ["smtp_relay"] },
);

const revokeCredential = keyedRoute("send", {
  method: "delete",
  path: "/smtp-credentials/{id}",
  tags,
  summary: "Revoke an SMTP credential",
  description:
    "The relay refuses it within seconds: new logins at once, open sessions at their next message. A test key may revoke only test credentials.",
  request: { params: IdParam("smtp") },
  responses: {
    200: jsonResponse(SmtpCredentialSchema.extend({ revoked_at: Timestamp }), "The revoked credential"),
    403: errorResponse("`live_key_required`: a test key tried to revoke a live credential"),
    404: errorResponse("No such credential"),
  },
});

export const smtpCredentialRoutes = createRouter()
  .openapi(listCredentials, async (c) => {
    const rows = await listSmtpCredentials(c.var.ctx.shared, c.get("auth").account.id);
    return c.json({ data: rows.map(serializeSmtpCredential) }, 200);
  })
  .openapi(createCredential, async (c) => {
    const outcome = await createSmtpCredential(c.var.ctx.shared, c.get("auth"), c.req.valid("json"));
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.json({ ...serializeSmtpCredential(outcome.row), password: outcome.password }, 201);
  })
  .openapi(revokeCredential, async (c) => {
    const outcome = await revokeSmtpCredential(c.var.ctx.shared, c.get("auth"), c.req.valid("param").id);
    if (outcome.kind === "not_found") throw notFound("SMTP credential");
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.json({ ...serializeSmtpCredential(outcome.row), revoked_at: outcome.row.revokedAt }, 200);
  });
