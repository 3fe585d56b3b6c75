import { Hono } from "hono";
import { config } from "../../config";
import { balancesOf } from "../../domain/accounts/accounts";
import { defaultRange, usageReport } from "../../domain/reports/reports";
import { requireSection } from "../guard";
import { Empty, Shell } from "../layout";
import type { DashboardEnv } from "../session";

export const usagePages = new Hono<DashboardEnv>().get("/usage", async (c) => {
  requireSection(c, "reports");
  const auth = c.get("auth");
  const usage = await usageReport(c.env.DB, auth.account.id, defaultRange({}));
  const balances = balancesOf(auth.account);
  const active = usage.daily.some((day) => day.api_calls + day.emails_sent + day.verifications > 0);
  const credits = usage.credits;
  const monthlyGrant = config(c.env).monthlyVerifyCredits[auth.account.plan] ?? 0;
  return c.html(
    <Shell title="Credits & usage" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/usage">
      <section class="grid stats">
        <div class="card stat">
          <div class="stat-label">Sending credits available</div>
          <div class="stat-value">{balances.send.available.toLocaleString("en")}</div>
          <div class="hint">
            balance {balances.send.balance.toLocaleString("en")}, reserved {balances.send.reserved.toLocaleString("en")}
          </div>
        </div>
        <div class="card stat">
          <div class="stat-label">Verification credits</div>
          <div class="stat-value">{balances.verify.available.toLocaleString("en")}</div>
          {monthlyGrant > 0 ? (
            <div class="hint">
              {monthlyGrant.toLocaleString("en")} granted each month ({auth.account.plan} plan); unused ones do not carry over
            </div>
          ) : null}
        </div>
        <div class="card stat">
          <div class="stat-label">Daily send limit</div>
          <div class="stat-value">{auth.account.dailySendLimit.toLocaleString("en")}</div>
          <div class="hint">{auth.account.rateLimitPerMinute.toLocaleString("en")} API requests a minute per key</div>
        </div>
      </section>
      <section class="card">
        <h2>
          Last 30 days ({usage.from} to {usage.to})
        </h2>
        {active ? (
          <div
            class="chart"
            role="img"
            aria-label={`API calls ${usage.api_calls}, emails sent ${usage.emails_sent}, verifications ${usage.verifications}`}
            data-chart={JSON.stringify({
              kind: "lines",
              x: usage.daily.map((day) => Date.parse(`${day.date}T00:00:00Z`) / 1000),
              series: [
                { label: "API calls", values: usage.daily.map((day) => day.api_calls) },
                { label: "Emails sent", values: usage.daily.map((day) => day.emails_sent) },
                { label: "Verifications", values: usage.daily.map((day) => day.verifications) },
              ],
            })}
          />
        ) : (
          <Empty>No usage in the last 30 days.</Empty>
        )}
        <dl class="counts">
          <div>
            <dt>API calls</dt>
            <dd>{usage.api_calls.toLocaleString("en")}</dd>
          </div>
          <div>
            <dt>Emails sent</dt>
            <dd>{usage.emails_sent.toLocaleString("en")}</dd>
          </div>
          <div>
            <dt>Verifications</dt>
            <dd>{usage.verifications.toLocaleString("en")}</dd>
          </div>
        </dl>
      </section>
      <section class="card">
        <h2>Credit movements (30 days)</h2>
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Balance</th>
                <th scope="col">Charged</th>
                <th scope="col">Refunded</th>
                <th scope="col">Reserved</th>
                <th scope="col">Released</th>
                <th scope="col">Granted monthly</th>
                <th scope="col">Expired unused</th>
              </tr>
            </thead>
            <tbody>
              <tr>
                <td>Sending</td>
                <td>{credits.send_charged}</td>
                <td>{credits.send_refunded}</td>
                <td>{credits.send_reserved}</td>
                <td>{credits.send_released}</td>
                <td>—</td>
                <td>—</td>
              </tr>
              <tr>
                <td>Verification</td>
                <td>{credits.verify_charged}</td>
                <td>{credits.verify_refunded}</td>
                <td>—</td>
                <td>—</td>
                <td>{credits.verify_granted}</td>
                <td>{credits.verify_expired}</td>
              </tr>
            </tbody>
          </table>
        </div>
      </section>
    </Shell>,
  );
});
