import { Hono } from "hono";
import { aiRequestInputSchema } from "../../domain/ai/draft";
import { aiUsage, findAiRequest, listAiRequests, submitAiRequest, type AiRequestRow } from "../../domain/ai/requests";
import { AppError, notFound } from "../../errors";
import { field, liveKeyOnly, parsedOrThrow } from "../guard";
import { Table } from "../components/table";
import { Csrf, Shell, StatusBadge, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

const working = (request: AiRequestRow) => request.status === "queued" || request.status === "running";

/** The request's status and, once done, links to its draft campaigns; polls itself while the model works. */
function RequestStatus({ request }: { request: AiRequestRow }) {
  return (
    <div
      id={`air-${request.id}`}
      hx-get={working(request) ? `/dashboard/ai/${request.id}/status` : undefined}
      hx-trigger={working(request) ? "every 2s" : undefined}
      hx-swap="outerHTML"
      aria-live="polite"
    >
      <StatusBadge status={request.status} />
      {request.error ? <span class="hint"> {request.error}</span> : null}
      {request.campaignIds.length > 0 ? (
        <ul>
          {request.campaignIds.map((id, index) => (
            <li>
              <a href={`/dashboard/campaigns/${id}`}>Open draft {index + 1}</a>
            </li>
          ))}
        </ul>
      ) : null}
    </div>
  );
}

export const aiPages = new Hono<DashboardEnv>()
  .get("/ai", async (c) => {
    const auth = c.get("auth");
    const [requests, usage] = await Promise.all([listAiRequests(c.var.ctx.db, auth.account.id, { limit: 20 }), aiUsage(c.var.ctx.db, auth.account)]);
    return c.html(
      <Shell title="AI drafts" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/ai">
        <section class="card">
          <h2>Request drafts</h2>
          <p class="hint">
            {usage.used} of {usage.limit} generations used this month ({usage.inProgress} in progress). Drafts become draft campaigns; nothing is
            sent.
          </p>
          <form method="post" action="/dashboard/ai" class="stack">
            <Csrf token={c.get("csrfToken")} />
            <label for="ai-prompt">What is the campaign about?</label>
            <textarea id="ai-prompt" name="prompt" required maxlength={4000} />
            <label for="ai-tone">Tone</label>
            <input id="ai-tone" name="tone" type="text" maxlength={200} placeholder="friendly" />
            <label for="ai-variations">Variations</label>
            <select id="ai-variations" name="variations">
              <option value="1">1</option>
              <option value="2">2</option>
              <option value="3">3</option>
            </select>
            <button type="submit">Request drafts</button>
          </form>
        </section>
        <section class="card">
          <h2>Requests</h2>
          <Table
            head={["Prompt", "Status and drafts", "Requested"]}
            rows={requests.slice(0, 20)}
            empty="No AI requests yet."
            row={(request) => (
              <tr>
                <td>{typeof request.input.prompt === "string" ? request.input.prompt.slice(0, 200) : "—"}</td>
                <td>
                  <RequestStatus request={request} />
                </td>
                <td>{formatTime(request.createdAt)}</td>
              </tr>
            )}
          />
        </section>
      </Shell>,
    );
  })
  .post("/ai", liveKeyOnly("AI drafts (campaigns)"), async (c) => {
    const form = await c.req.parseBody();
    const body = parsedOrThrow(
      aiRequestInputSchema,
      { prompt: field(form, "prompt"), tone: field(form, "tone") || undefined, variations: Number(field(form, "variations") || "1") },
      "The drafts cannot be requested",
    );
    const outcome = await submitAiRequest(c.var.ctx, c.get("auth").account.id, body);
    if (outcome.kind === "not_configured")
      throw new AppError("ai_not_configured", `AI drafts are not available on this deployment: ${outcome.reason}`);
    if (outcome.kind === "quota_exceeded") throw new AppError("ai_quota_exceeded", `This month's ${outcome.limit} AI generations are used up`);
    if (outcome.kind === "queue_unavailable") throw new AppError("upstream_unavailable", "The request could not be queued; try again shortly");
    return c.redirect("/dashboard/ai", 303);
  })
  .get("/ai/:id/status", async (c) => {
    const request = await findAiRequest(c.var.ctx.db, c.get("auth").account.id, c.req.param("id"));
    if (!request) throw notFound("AI request");
    return c.html(<RequestStatus request={request} />);
  });
