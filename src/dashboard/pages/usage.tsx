import { Hono } from "hono";
import { config } from "../../config";
import { balancesOf, findBalances } from "../../domain/accounts/accounts";
import { defaultRange, usageReport } from "../../domain/reports/reports";
import { ChartCard, Stat, dayAxis } from "../components/stats";
import { Table } from "../components/table";
import { Shell } from "../layout";
import type { DashboardEnv } from "../session";

const usageSeries = [
  ["api_calls", "API calls"],
  ["emails_sent", "Emails sent"],
  ["verifications", "Verifications"],
] as const;

export const usagePages = new Hono<DashboardEnv>().get("/usage", async (c) => {
  const auth = c.get("auth");
  const [usage, current] = await Promise.all([
    usageReport(c.var.ctx.db, auth.account.id, defaultRange({})),
    findBalances(c.var.ctx.db, auth.account.id),
  ]);
  const balances = balancesOf(current);
  const active = usage.daily.some((day) => day.api_calls + day.emails_sent + day.verifications > 0);
  const credits = usage.credits;
  const monthlyGrant = config(c.env).monthlyVerifyCredits[auth.account.plan] ?? 0;
  return c.html(
    <Shell title="Credits & usage" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/usage">
      <section class="grid stats">
        <Stat
          label="Sending credits available"
          value={balances.send.available.toLocaleString("en")}
          hint={`balance ${balances.send.balance.toLocaleString("en")}, reserved ${balances.send.reserved.toLocaleString("en")}`}
        />
        <Stat
          label="Verification credits"
          value={balances.verify.available.toLocaleString("en")}
          hint={
            monthlyGrant > 0
              ? `${monthlyGrant.toLocaleString("en")} granted each month (${auth.account.plan} plan); unused ones do not carry over`
              : undefined
          }
        />
        <Stat
          label="Daily send limit"
          value={auth.account.dailySendLimit.toLocaleString("en")}
          hint={`${auth.account.rateLimitPerMinute.toLocaleString("en")} API requests a minute per key`}
        />
      </section>
      <ChartCard
        title={`Last 30 days (${usage.from} to ${usage.to})`}
        chart={
          active
            ? {
                data: {
                  kind: "lines",
                  x: dayAxis(usage.daily),
                  series: usageSeries.map(([counter, label]) => ({ label, values: usage.daily.map((day) => day[counter]) })),
                },
                label: `API calls ${usage.api_calls}, emails sent ${usage.emails_sent}, verifications ${usage.verifications}`,
              }
            : undefined
        }
        empty="No usage in the last 30 days."
        counts={usageSeries.map(([counter, label]) => [label, usage[counter]])}
      />
      <section class="card">
        <h2>Credit movements (30 days)</h2>
        <Table
          head={["Balance", "Charged", "Refunded", "Reserved", "Released", "Granted monthly", "Expired unused"]}
          rows={[
            ["Sending", credits.send_charged, credits.send_refunded, credits.send_reserved, credits.send_released, "—", "—"],
            ["Verification", credits.verify_charged, credits.verify_refunded, "—", "—", credits.verify_granted, credits.verify_expired],
          ]}
          row={(cells) => (
            <tr>
              {cells.map((cell) => (
                <td>{cell}</td>
              ))}
            </tr>
          )}
        />
      </section>
    </Shell>,
  );
});
