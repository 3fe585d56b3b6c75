import { Hono, type Context } from "hono";
import { eventTypes } from "../../domain/events/events";
import {
  createEndpoint,
  deleteEndpoint,
  findEndpoint,
  listDeliveries,
  listEndpoints,
  MAX_ENDPOINTS_PER_ACCOUNT,
  updateEndpoint,
  type WebhookEndpointRow,
} from "../../domain/webhooks/endpoints";
import { replayEvent, sendTestEvent, type AttemptResult } from "../../domain/webhooks/delivery";
import { notFound } from "../../errors";
import { orRefuse } from "../../http/refusals";
import { field, liveKeyOnly, parsedOrThrow } from "../guard";
import { PostButton } from "../components/post-button";
import { SecretOnce } from "../components/secret-once";
import { Table } from "../components/table";
import { canSee, Csrf, Notice, Shell, StatusBadge, formatTime } from "../layout";
import { webhookInput } from "../../domain/webhooks/input";
import type { DashboardEnv } from "../session";

type Page = Context<DashboardEnv>;

function AttemptNotice({ what, result }: { what: string; result: AttemptResult }) {
  return (
    <Notice kind={result.ok ? "ok" : "error"}>
      {what} {result.ok ? "delivered" : "failed"}: {result.statusCode ?? "no response"} in {result.durationMs} ms
      {result.responseSnippet ? `: ${result.responseSnippet}` : ""}
    </Notice>
  );
}

/** Who is changing endpoints, for the rule that received mail goes only where an `inbound` key sent it. */
const caller = (c: Page) => ({ accountId: c.get("auth").account.id, readsInbound: canSee(c.get("auth"), "inbound") });

async function ownedEndpoint(c: Page): Promise<WebhookEndpointRow> {
  const endpoint = await findEndpoint(c.var.ctx.db, c.get("auth").account.id, c.req.param("id") ?? "");
  if (!endpoint) throw notFound("Webhook endpoint");
  return endpoint;
}

async function endpointPage(c: Page, endpoint: WebhookEndpointRow, secret?: string) {
  const auth = c.get("auth");
  const csrfToken = c.get("csrfToken");
  const deliveries = (await listDeliveries(c.var.ctx.db, auth.account.id, endpoint.id, {}, { limit: 50 })) ?? [];
  return c.html(
    <Shell title={`Webhook ${endpoint.url}`} auth={auth} csrfToken={csrfToken} current="/dashboard/webhooks">
      {secret ? <SecretOnce title="Signing secret" secret={secret} label="the signing secret" /> : null}
      <section class="card">
        <h2>Endpoint</h2>
        <dl class="facts">
          <dt>URL</dt>
          <dd>
            <code>{endpoint.url}</code>
          </dd>
          <dt>Status</dt>
          <dd>
            <StatusBadge status={endpoint.enabled ? "active" : "disabled"} />
            {endpoint.disabledReason ? ` ${endpoint.disabledReason}` : ""}
          </dd>
          <dt>Events</dt>
          <dd>{endpoint.events.join(", ")}</dd>
          <dt>Description</dt>
          <dd>{endpoint.description ?? "—"}</dd>
        </dl>
        <div class="actions">
          <PostButton action={`/dashboard/webhooks/${endpoint.id}/test`} csrfToken={csrfToken} htmx={{ target: "#test-result" }}>
            Send test event
          </PostButton>
          <PostButton
            action={`/dashboard/webhooks/${endpoint.id}/enabled`}
            csrfToken={csrfToken}
            tone="secondary"
            fields={{ enabled: endpoint.enabled ? "false" : "true" }}
          >
            {endpoint.enabled ? "Disable" : "Enable"}
          </PostButton>
          <PostButton action={`/dashboard/webhooks/${endpoint.id}/rotate`} csrfToken={csrfToken} tone="secondary">
            Rotate secret
          </PostButton>
          <PostButton action={`/dashboard/webhooks/${endpoint.id}/delete`} csrfToken={csrfToken} tone="danger">
            Delete
          </PostButton>
        </div>
        <div id="test-result" aria-live="polite" />
      </section>
      <section class="card">
        <h2>Deliveries</h2>
        <Table
          head={["Event", "Attempt", "Status", "Response", "At", "Replay"]}
          rows={deliveries.slice(0, 50)}
          empty="No deliveries yet. Send a test event, or wait for the events this endpoint subscribes to."
          row={(delivery) => (
            <tr>
              <td>
                {delivery.eventType}
                <div class="hint">{delivery.eventId}</div>
              </td>
              <td>{delivery.attempt}</td>
              <td>
                <StatusBadge status={delivery.status === "succeeded" ? "delivered" : delivery.status} />
                {delivery.nextRetryAt ? <div class="hint">retry {formatTime(delivery.nextRetryAt)}</div> : null}
              </td>
              <td>
                {delivery.statusCode ?? "—"} {delivery.durationMs !== null ? <span class="hint">{delivery.durationMs} ms</span> : null}
                {delivery.responseSnippet ? <div class="hint">{delivery.responseSnippet}</div> : null}
              </td>
              <td>{formatTime(delivery.createdAt)}</td>
              <td>
                <PostButton
                  action={`/dashboard/webhooks/${endpoint.id}/events/${delivery.eventId}/replay`}
                  csrfToken={csrfToken}
                  tone="secondary"
                  label={`Replay ${delivery.eventType} ${delivery.eventId}`}
                  htmx={{ target: "#test-result" }}
                >
                  Replay
                </PostButton>
              </td>
            </tr>
          )}
        />
      </section>
      <a href="/dashboard/webhooks">← Webhooks</a>
    </Shell>,
  );
}

export const webhookPages = new Hono<DashboardEnv>()
  .get("/webhooks", async (c) => {
    const auth = c.get("auth");
    const endpoints = await listEndpoints(c.var.ctx.db, auth.account.id, { limit: MAX_ENDPOINTS_PER_ACCOUNT });
    const readsInbound = caller(c).readsInbound;
    return c.html(
      <Shell title="Webhooks" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/webhooks">
        <section class="card">
          <h2>Endpoints</h2>
          <Table
            head={["URL", "Events", "Status"]}
            rows={endpoints.slice(0, MAX_ENDPOINTS_PER_ACCOUNT)}
            empty="No endpoints yet. Add one to receive signed events as they happen."
            row={(endpoint) => (
              <tr>
                <td>
                  <a href={`/dashboard/webhooks/${endpoint.id}`}>{endpoint.url}</a>
                </td>
                <td>{endpoint.events.join(", ")}</td>
                <td>
                  <StatusBadge status={endpoint.enabled ? "active" : "disabled"} />
                </td>
              </tr>
            )}
          />
        </section>
        <section class="card">
          <h2>Add an endpoint</h2>
          <form method="post" action="/dashboard/webhooks" class="stack">
            <Csrf token={c.get("csrfToken")} />
            <label for="wh-url">URL (https)</label>
            <input id="wh-url" name="url" type="url" required maxlength={2048} placeholder="https://example.com/webhooks/mailforge" />
            <label for="wh-description">Description</label>
            <input id="wh-description" name="description" type="text" maxlength={500} />
            <fieldset>
              <legend>
                {readsInbound
                  ? "Events (none ticked: all of them)"
                  : "Events (pick them: received mail, and so all events, needs a key with the inbound scope)"}
              </legend>
              {eventTypes
                .filter((type) => readsInbound || type !== "email.received")
                .map((type) => (
                  <label>
                    <input type="checkbox" name="events" value={type} /> {type}
                  </label>
                ))}
            </fieldset>
            <button type="submit">Add endpoint</button>
          </form>
        </section>
      </Shell>,
    );
  })
  .post("/webhooks", liveKeyOnly("Creating a webhook endpoint"), async (c) => {
    const form = await c.req.parseBody({ all: true });
    const picked = ([] as unknown[]).concat(form.events ?? []);
    const body = parsedOrThrow(
      webhookInput,
      { url: field(form, "url"), description: field(form, "description") || undefined, events: picked.length > 0 ? picked : ["*"] },
      "The webhook endpoint cannot be added",
    );
    const outcome = orRefuse(await createEndpoint(c.var.ctx, caller(c), body));
    return endpointPage(c, outcome.endpoint, outcome.secret);
  })
  .get("/webhooks/:id", async (c) => {
    return endpointPage(c, await ownedEndpoint(c));
  })
  .post("/webhooks/:id/test", async (c) => {
    const { result } = await sendTestEvent(c.var.ctx, await ownedEndpoint(c), "relay.delivered");
    if (c.req.header("HX-Request") === "true") return c.html(<AttemptNotice what="Test event" result={result} />);
    return c.redirect(`/dashboard/webhooks/${c.req.param("id")}`, 303);
  })
  .post("/webhooks/:id/events/:eventId/replay", liveKeyOnly("Replaying a webhook delivery"), async (c) => {
    const result = await replayEvent(c.var.ctx, await ownedEndpoint(c), c.req.param("eventId"));
    // Test events are not stored, and others are deleted after RETENTION_DAYS: only stored ones can be sent again.
    if (!result) throw notFound("Event (test events and events past the retention window cannot be replayed)");
    if (c.req.header("HX-Request") === "true") return c.html(<AttemptNotice what="Replay" result={result} />);
    return c.redirect(`/dashboard/webhooks/${c.req.param("id")}`, 303);
  })
  .post("/webhooks/:id/enabled", liveKeyOnly("Changing a webhook endpoint"), async (c) => {
    const enabled = field(await c.req.parseBody(), "enabled") === "true";
    const outcome = orRefuse(await updateEndpoint(c.var.ctx, caller(c), c.req.param("id"), { enabled }));
    if (outcome.kind === "not_found") throw notFound("Webhook endpoint");
    return c.redirect(`/dashboard/webhooks/${outcome.endpoint.id}`, 303);
  })
  .post("/webhooks/:id/rotate", liveKeyOnly("Changing a webhook endpoint"), async (c) => {
    const outcome = orRefuse(await updateEndpoint(c.var.ctx, caller(c), c.req.param("id"), { rotateSecret: true }));
    if (outcome.kind === "not_found") throw notFound("Webhook endpoint");
    return endpointPage(c, outcome.endpoint, outcome.secret);
  })
  .post("/webhooks/:id/delete", liveKeyOnly("Deleting a webhook endpoint"), async (c) => {
    if (!(await deleteEndpoint(c.var.ctx.db, c.get("auth").account.id, c.req.param("id")))) throw notFound("Webhook endpoint");
    return c.redirect("/dashboard/webhooks", 303);
  });
