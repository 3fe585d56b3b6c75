import { Hono, type Context } from "hono";
import { createApiKey, listApiKeys, revokeApiKey, rotateApiKey, type ApiKeyRow } from "../../domain/accounts/api-keys";
import { apiKeyInput } from "../../domain/accounts/input";
import { AppError, notFound } from "../../errors";
import { scopes, type Scope } from "../../access";
import { field, parsedOrThrow } from "../guard";
import { PostButton } from "../components/post-button";
import { SecretOnce } from "../components/secret-once";
import { Table } from "../components/table";
import { Csrf, Shell, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

function KeyTable({ keys, csrfToken, currentKeyId }: { keys: ApiKeyRow[]; csrfToken: string; currentKeyId: string }) {
  return (
    <Table
      head={["Name", "Key", "Scopes", "Last used", "Actions"]}
      rows={keys}
      empty="No API keys yet."
      row={(key) => (
        <tr>
          <td>
            {key.name}
            {key.id === currentKeyId ? <span class="badge">this session</span> : null}
          </td>
          <td>
            <code>{key.prefix}…</code> <span class={`badge ${key.mode === "test" ? "warn" : ""}`}>{key.mode}</span>
          </td>
          <td>{key.scopes ? key.scopes.join(", ") : "full access"}</td>
          <td>{formatTime(key.lastUsedAt)}</td>
          <td class="actions">
            <PostButton action={`/dashboard/api-keys/${key.id}/rotate`} csrfToken={csrfToken} tone="secondary" label={`Rotate ${key.name}`}>
              Rotate
            </PostButton>
            <PostButton action={`/dashboard/api-keys/${key.id}/revoke`} csrfToken={csrfToken} tone="danger" label={`Revoke ${key.name}`}>
              Revoke
            </PostButton>
          </td>
        </tr>
      )}
    />
  );
}

function NewKeyForm({ csrfToken, grantable }: { csrfToken: string; grantable: readonly Scope[] | null }) {
  return (
    <form method="post" action="/dashboard/api-keys" class="stack">
      <Csrf token={csrfToken} />
      <label for="key-name">Name</label>
      <input id="key-name" name="name" type="text" required maxlength={100} placeholder="Production server" />
      <fieldset>
        <legend>{grantable ? "Scopes (your role's)" : "Scopes (none ticked: full access)"}</legend>
        {(grantable ?? scopes).map((scope) => (
          <label>
            <input type="checkbox" name="scopes" value={scope} /> {scope}
          </label>
        ))}
      </fieldset>
      <label for="key-mode">Mode</label>
      <select id="key-mode" name="mode">
        <option value="live">live: sends real mail</option>
        <option value="test">test: simulated, never delivered</option>
      </select>
      <button type="submit">Create key</button>
    </form>
  );
}

async function keysPage(c: Context<DashboardEnv>, notice?: { title: string; secret: string }, status: 200 | 201 = 200) {
  const auth = c.get("auth");
  const keys = await listApiKeys(c.var.ctx.shared, auth.account.id);
  return c.html(
    <Shell title="API keys" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/api-keys">
      {notice ? <SecretOnce {...notice} label="the API key" /> : null}
      <section class="card">
        <h2>Active keys</h2>
        <KeyTable keys={keys} csrfToken={c.get("csrfToken")} currentKeyId={auth.apiKey.id} />
      </section>
      <section class="card">
        <h2>Create a key</h2>
        <NewKeyForm csrfToken={c.get("csrfToken")} grantable={auth.apiKey.scopes} />
      </section>
    </Shell>,
    status,
  );
}

/**
 * A member whose role has scopes (a developer) creates and rotates only keys within them: a full-access key would
 * let them make themselves an admin through the members API. Revoking takes no power, so any key may be revoked.
 */
function requireWithinRole(c: Context<DashboardEnv>, keyScopes: readonly Scope[] | null | undefined): void {
  const { apiKey, member } = c.get("auth");
  const mine = apiKey.scopes;
  if (mine === null || !member) return;
  if (!keyScopes || keyScopes.some((scope) => !mine.includes(scope))) {
    throw new AppError("scope_missing", `Your role (${member.role}) manages keys with these scopes only: ${mine.join(", ")}`);
  }
}

export const apiKeyPages = new Hono<DashboardEnv>()
  .get("/api-keys", async (c) => {
    return keysPage(c);
  })
  .post("/api-keys", async (c) => {
    const form = await c.req.parseBody({ all: true });
    const picked = ([] as unknown[]).concat(form.scopes ?? []);
    const body = parsedOrThrow(
      apiKeyInput,
      { name: form.name, scopes: picked.length > 0 ? picked : undefined, mode: field(form, "mode") || undefined },
      "The key cannot be created",
    );
    requireWithinRole(c, body.scopes);
    const outcome = await createApiKey(c.var.ctx.shared, c.get("auth"), body);
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    // The secret is rendered into this response only; a reload shows the list without it.
    return keysPage(c, { title: `Key "${outcome.row.name}" created.`, secret: outcome.key }, 201);
  })
  .post("/api-keys/:id/rotate", async (c) => {
    const target = (await listApiKeys(c.var.ctx.shared, c.get("auth").account.id)).find((key) => key.id === c.req.param("id"));
    if (target) requireWithinRole(c, target.scopes);
    const outcome = await rotateApiKey(c.var.ctx.shared, c.get("auth"), c.req.param("id"));
    if (outcome.kind === "not_found") throw notFound("API key");
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    if (outcome.row.id === c.get("auth").apiKey.id) {
      // Rotating the key this session signed in with ends the session (it is bound to the old secret).
      return c.html(
        <Shell title="Key rotated">
          <SecretOnce title={`Key "${outcome.row.name}" rotated; sign in again with its new secret.`} secret={outcome.key} label="the API key" />
          <p>
            <a href="/dashboard/sign-in">Sign in</a>
          </p>
        </Shell>,
      );
    }
    return keysPage(c, { title: `Key "${outcome.row.name}" rotated; the old secret no longer works.`, secret: outcome.key });
  })
  .post("/api-keys/:id/revoke", async (c) => {
    const outcome = await revokeApiKey(c.var.ctx.shared, c.get("auth"), c.req.param("id"));
    if (outcome.kind === "not_found") throw notFound("API key");
    if (outcome.kind === "live_key_required") throw new AppError(outcome.kind, outcome.message);
    if (outcome.row.id === c.get("auth").apiKey.id) return c.redirect("/dashboard/sign-in", 303);
    return c.redirect("/dashboard/api-keys", 303);
  });
