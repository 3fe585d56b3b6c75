import { Hono, type Context } from "hono";
import { createSmtpCredential, listSmtpCredentials, revokeSmtpCredential } from "../../domain/smtp/credentials";
import { smtpCredentialInput } from "../../domain/smtp/input";
import { AppError, notFound } from "../../errors";
import { needs, parsedOrThrow } from "../guard";
import { NameForm } from "../components/name-form";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Copyable, Notice, Shell, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

async function credentialsPage(c: Context<DashboardEnv>, created?: { username: string; password: string }) {
  const auth = c.get("auth");
  const csrfToken = c.get("csrfToken");
  const credentials = await listSmtpCredentials(c.var.ctx.shared, auth.account.id);
  return c.html(
    <Shell title="SMTP credentials" auth={auth} csrfToken={csrfToken} current="/dashboard/smtp-credentials">
      {created ? (
        <Notice kind="ok">
          <strong>Credential created.</strong> Copy the password now: it is shown only this once.
          <span class="secret">
            Username <Copyable value={created.username} label="the username" />
          </span>
          <span class="secret" data-testid="new-secret">
            Password <Copyable value={created.password} label="the password" />
          </span>
        </Notice>
      ) : null}
      <section class="card">
        <h2>Active credentials</h2>
        <p class="hint">For the SMTP relay: ports 587 and 2525 with STARTTLS, 465 with implicit TLS.</p>
        <Table
          head={["Name", "Username", "Mode", "Last used", "Revoke"]}
          rows={credentials}
          empty="No SMTP credentials yet."
          row={(credential) => (
            <tr>
              <td>{credential.name}</td>
              <td>
                <code>{credential.username}</code>
              </td>
              <td>{credential.mode}</td>
              <td>{formatTime(credential.lastUsedAt)}</td>
              <td>
                <PostButton
                  action={`/dashboard/smtp-credentials/${credential.id}/revoke`}
                  csrfToken={csrfToken}
                  tone="danger"
                  label={`Revoke ${credential.name}`}
                >
                  Revoke
                </PostButton>
              </td>
            </tr>
          )}
        />
      </section>
      <section class="card">
        <h2>Create a credential</h2>
        <NameForm
          action="/dashboard/smtp-credentials"
          csrfToken={csrfToken}
          label="Name"
          maxlength={100}
          placeholder="WordPress"
          submit="Create credential"
        />
      </section>
    </Shell>,
    created ? 201 : 200,
  );
}

export const smtpCredentialPages = new Hono<DashboardEnv>()
  .get("/smtp-credentials", (c) => credentialsPage(c))
  .post("/smtp-credentials", needs("send", "smtp_relay"), async (c) => {
    const body = parsedOrThrow(smtpCredentialInput, { name: (await c.req.parseBody()).name }, "The credential cannot be created");
    const outcome = await createSmtpCredential(c.var.ctx.shared, c.get("auth"), body);
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return credentialsPage(c, { username: outcome.row.username, password: outcome.password });
  })
  .post("/smtp-credentials/:id/revoke", async (c) => {
    const outcome = await revokeSmtpCredential(c.var.ctx.shared, c.get("auth"), c.req.param("id"));
    if (outcome.kind === "not_found") throw notFound("SMTP credential");
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    return c.redirect("/dashboard/smtp-credentials", 303);
  });
