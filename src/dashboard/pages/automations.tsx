import { Hono } from "hono";
import { config } from "../../config";
import { findAutomation, listAutomations, privateUrl } from "../../domain/automations/automations";
import { listRuns } from "../../domain/automations/runs";
import type { Step } from "../../domain/automations/steps";
import { notFound } from "../../errors";
import { requireSection } from "../guard";
import { Copyable, Empty, Shell, StatusBadge, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

/** One line per step, in the words of the step's type and its main setting. */
function describeStep(step: Step): string {
  const { type, ...settings } = step as Step & { type: string };
  const details = Object.entries(settings)
    .filter(([, value]) => typeof value === "string" || typeof value === "number" || typeof value === "boolean")
    .map(([name, value]) => `${name}: ${String(value)}`)
    .join(", ");
  return details ? `${type} (${details})` : type;
}

export const automationPages = new Hono<DashboardEnv>()
  .get("/automations", async (c) => {
    requireSection(c, "automations", "automations");
    const auth = c.get("auth");
    const rows = await listAutomations(c.env.DB, auth.account.id, { limit: 50 });
    return c.html(
      <Shell title="Automations" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
        <section class="card">
          {rows.length === 0 ? (
            <Empty>No automations yet. Create them with the API (POST /api/v1/automations); they show here with their runs.</Empty>
          ) : (
            <div class="table-wrap">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Status</th>
                    <th scope="col">Steps</th>
                    <th scope="col">Updated</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.slice(0, 50).map((automation) => (
                    <tr>
                      <td>
                        <a href={`/dashboard/automations/${automation.id}`}>{automation.name}</a>
                      </td>
                      <td>
                        <StatusBadge status={automation.status} />
                      </td>
                      <td>{automation.steps.length}</td>
                      <td>{formatTime(automation.updatedAt)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
        </section>
      </Shell>,
    );
  })
  .get("/automations/:id", async (c) => {
    requireSection(c, "automations", "automations");
    const auth = c.get("auth");
    const automation = await findAutomation(c.env.DB, auth.account.id, c.req.param("id"));
    if (!automation) throw notFound("Automation");
    const runs = await listRuns(c.env.DB, auth.account.id, automation.id, { limit: 50 });
    return c.html(
      <Shell title={automation.name} auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/automations">
        <div class="grid two">
          <section class="card">
            <h2>Steps</h2>
            <ol>
              {(automation.steps as Step[]).map((step) => (
                <li>{describeStep(step)}</li>
              ))}
            </ol>
            <h3>Private URL</h3>
            <p class="hint">Anyone with this URL can start a run; treat it like a password.</p>
            <Copyable value={privateUrl(config(c.env), automation.privatePath)} label="the private URL" />
          </section>
          <section class="card">
            <h2>Runs</h2>
            {runs.length === 0 ? (
              <Empty>No runs yet.</Empty>
            ) : (
              <div class="table-wrap">
                <table>
                  <thead>
                    <tr>
                      <th scope="col">Run</th>
                      <th scope="col">Status</th>
                      <th scope="col">Started</th>
                    </tr>
                  </thead>
                  <tbody>
                    {runs.slice(0, 50).map((run) => (
                      <tr>
                        <td>
                          <code>{run.id}</code>
                          <div class="hint">{run.email}</div>
                        </td>
                        <td>
                          <StatusBadge status={run.status} />
                          {run.error ? <div class="hint">{run.error}</div> : null}
                        </td>
                        <td>{formatTime(run.createdAt)}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </section>
        </div>
        <a href="/dashboard/automations">← Automations</a>
      </Shell>,
    );
  });
