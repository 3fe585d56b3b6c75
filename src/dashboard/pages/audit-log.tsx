import { Hono } from "hono";
import { listAudit } from "../../domain/audit/audit";
import { dateFilterBound } from "../../lib/pagination";
import { Table } from "../components/table";
import { Pager, Shell, formatTime, pageOfRows } from "../layout";
import type { DashboardEnv } from "../session";

const pageSize = 50;
const isoDay = /^\d{4}-\d{2}-\d{2}$/;
const day = (value: string | undefined, end: "start" | "end") => (value && isoDay.test(value) ? dateFilterBound(value, end) : undefined);

export const auditLogPages = new Hono<DashboardEnv>().get("/audit-log", async (c) => {
  const auth = c.get("auth");
  const query = c.req.query();
  const rows = await listAudit(c.var.ctx.db, auth.account.id, {
    cursor: query.cursor || undefined,
    limit: pageSize,
    actor: query.actor?.trim() || undefined,
    action: query.action?.trim() || undefined,
    from: day(query.from, "start"),
    to: day(query.to, "end"),
  });
  const { page, next } = pageOfRows(rows, pageSize);
  return c.html(
    <Shell title="Audit log" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/audit-log">
      <form method="get" action="/dashboard/audit-log" class="filters" aria-label="Filter">
        <label>
          Who <input name="actor" value={query.actor} placeholder="ann@example.com or key_…" />
        </label>
        <label>
          Action <input name="action" value={query.action} placeholder="member.invited" />
        </label>
        <label>
          From <input name="from" type="date" value={query.from} />
        </label>
        <label>
          To <input name="to" type="date" value={query.to} />
        </label>
        <button type="submit">Filter</button>
      </form>
      <section class="card">
        <Table
          head={["When", "Who", "Action", "On", "From"]}
          rows={page}
          empty="Nothing recorded for these filters. Changes through the API, the dashboard and the operator, and sign-ins, show here."
          row={(entry) => (
            <tr>
              <td>{formatTime(entry.createdAt)}</td>
              <td>
                {entry.actorName} <span class="badge">{entry.actorType.replace("_", " ")}</span>
              </td>
              <td>
                <code>{entry.action}</code>
              </td>
              <td>{entry.targetId ? <code>{entry.targetId}</code> : (entry.targetType ?? "—")}</td>
              <td title={entry.userAgent ?? undefined}>
                {entry.via}
                {entry.ip ? ` · ${entry.ip}` : ""}
              </td>
            </tr>
          )}
        />
        <Pager next={next} path="/dashboard/audit-log" query={query} />
      </section>
    </Shell>,
  );
});
