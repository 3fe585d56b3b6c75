import { Hono } from "hono";
import { createDomain, findDomain, listDomains, verifyDomain, type DomainRow } from "../../domain/domains/domains";
import { domainInput, warmupInput } from "../../domain/domains/input";
import { notFound } from "../../errors";
import { orRefuse } from "../../http/refusals";
import { BOUNCE_RATE_LIMIT, COMPLAINT_RATE_LIMIT, domainRates, type DomainRates } from "../../domain/feedback/reputation";
import { setWarmup, todaysCap, warmupPresets, warmupSentToday } from "../../domain/feedback/warmup";
import { field, liveKeyOnly, parsedOrThrow } from "../guard";
import { NameForm } from "../components/name-form";
import { PostButton } from "../components/post-button";
import { Table } from "../components/table";
import { Copyable, Csrf, Notice, Shell, StatusBadge, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

const purposeLabel: Record<DomainRow["records"][number]["purpose"], string> = {
  dkim: "DKIM (required)",
  spf: "SPF (required)",
  dmarc: "DMARC (recommended)",
  return_path: "Return path",
  dkim_ed25519: "DKIM Ed25519 (optional)",
  inbound: "Receiving (MX)",
};

function Records({ domain, csrfToken }: { domain: DomainRow; csrfToken: string }) {
  return (
    <section class="card" id="records">
      <div class="actions">
        <h2>
          {domain.name} <StatusBadge status={domain.status} />
        </h2>
        <PostButton action={`/dashboard/domains/${domain.id}/verify`} csrfToken={csrfToken} htmx={{ target: "#records", swap: "outerHTML" }}>
          Verify now<span class="when-busy">…</span>
        </PostButton>
      </div>
      <p class="hint">
        Publish the TXT records at your DNS host, then verify (the return path's MX, when listed, is the operator's). Last checked{" "}
        {formatTime(domain.lastCheckedAt)}
        {domain.verifiedAt ? `; verified ${formatTime(domain.verifiedAt)}` : ""}.
      </p>
      <Table
        head={["Record", "Name", "Value", "Status"]}
        rows={domain.records}
        row={(record) => (
          <tr>
            <td>
              {record.type}
              <div class="hint">{purposeLabel[record.purpose]}</div>
            </td>
            <td>
              <Copyable value={record.name} label={`${record.purpose} record name`} />
            </td>
            <td>
              <Copyable value={record.value} label={`${record.purpose} record value`} />
            </td>
            <td>
              <StatusBadge status={record.status} />
              {record.found && record.found.length > 0 && record.status !== "verified" ? (
                <div class="hint">Found: {record.found.join(" | ")}</div>
              ) : null}
            </td>
          </tr>
        )}
      />
    </section>
  );
}

const percent = (value: number) => `${(value * 100).toFixed(2)}%`;

function RateMeter({ label, rate, limit, count, sent }: { label: string; rate: number; limit: number; count: number; sent: number }) {
  return (
    <div>
      <div class="hint">
        Today's {label} rate (limit {percent(limit)})
      </div>
      <strong>{percent(rate)}</strong>
      <div class="hint">
        {count} of {sent} sent
      </div>
    </div>
  );
}

/** Warm-up and the reputation guard (docs/deliverability.md): today's rates against the limits, the schedule, its controls. */
function Deliverability({ domain, rates, sentToday, csrfToken }: { domain: DomainRow; rates: DomainRates; sentToday: number; csrfToken: string }) {
  const cap = todaysCap(domain);
  const active = domain.warmupStatus === "active";
  return (
    <section class="card" id="deliverability">
      <h2>Deliverability</h2>
      <div class="grid meters">
        <div>
          <div class="hint">Reputation</div>
          <StatusBadge status={domain.reputationStatus === "held" ? "held" : "ok"} />
          {domain.reputationReason ? (
            <div class="hint">{domain.reputationReason}. Campaign sends are refused until the operator clears the hold.</div>
          ) : null}
        </div>
        <RateMeter label="bounce" rate={rates.bounceRate} limit={BOUNCE_RATE_LIMIT} count={rates.hardBounces} sent={rates.sent} />
        <RateMeter label="complaint" rate={rates.complaintRate} limit={COMPLAINT_RATE_LIMIT} count={rates.complaints} sent={rates.sent} />
      </div>
      <h3>Warm-up</h3>
      <p>
        <StatusBadge status={domain.warmupStatus} />{" "}
        {active && cap !== undefined
          ? `Today: ${sentToday} of ${cap} recipients; the rest waits for tomorrow.`
          : domain.warmupStatus === "paused" && domain.warmupPausedReason
            ? `Paused: ${domain.warmupPausedReason}.`
            : domain.warmupStatus === "completed"
              ? "The schedule is done: no daily cap."
              : "No daily cap."}
      </p>
      <form method="post" action={`/dashboard/domains/${domain.id}/warmup`} class="inline">
        <Csrf token={csrfToken} />
        {active ? (
          <>
            <input type="hidden" name="enabled" value="false" />
            <button type="submit" class="secondary">
              Pause warm-up
            </button>
          </>
        ) : (
          <>
            <input type="hidden" name="enabled" value="true" />
            <label>
              Schedule
              <select name="preset">
                {Object.entries(warmupPresets).map(([name, caps]) => (
                  <option value={name} selected={name === "standard"}>
                    {name}: {caps.length} days, {caps[0]} to {caps.at(-1)?.toLocaleString("en-US")}/day
                  </option>
                ))}
              </select>
            </label>
            <button type="submit">{domain.warmupStatus === "paused" ? "Resume warm-up" : "Start warm-up"}</button>
          </>
        )}
      </form>
    </section>
  );
}

export const domainPages = new Hono<DashboardEnv>()
  .get("/domains", async (c) => {
    const auth = c.get("auth");
    const rows = await listDomains(c.var.ctx.shared, auth.account.id, { limit: 100 });
    return c.html(
      <Shell title="Domains" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/domains">
        <section class="card">
          <h2>Sending domains</h2>
          <Table
            head={["Domain", "Status", "Added"]}
            rows={rows.slice(0, 100)}
            empty="No domains yet. Add the domain you send from; you get the DNS records to publish."
            row={(domain) => (
              <tr>
                <td>
                  <a href={`/dashboard/domains/${domain.id}`}>{domain.name}</a>
                </td>
                <td>
                  <StatusBadge status={domain.status} />
                </td>
                <td>{formatTime(domain.createdAt)}</td>
              </tr>
            )}
          />
        </section>
        <section class="card">
          <h2>Add a domain</h2>
          <NameForm
            action="/dashboard/domains"
            csrfToken={c.get("csrfToken")}
            label="Domain"
            maxlength={253}
            placeholder="mail.example.com"
            submit="Add domain"
          />
        </section>
      </Shell>,
    );
  })
  .post("/domains", liveKeyOnly("Adding a sending domain"), async (c) => {
    const body = parsedOrThrow(domainInput, { name: (await c.req.parseBody()).name }, "The domain cannot be added");
    const { domain } = orRefuse(await createDomain(c.var.ctx.shared, c.get("auth").account.id, body.name, c.env));
    return c.redirect(`/dashboard/domains/${domain.id}`, 303);
  })
  .get("/domains/:id", async (c) => {
    const auth = c.get("auth");
    const domain = await findDomain(c.var.ctx.shared, auth.account.id, c.req.param("id"));
    if (!domain) throw notFound("Domain");
    const [rates, sentToday] = await Promise.all([domainRates(c.var.ctx.db, domain), warmupSentToday(c.var.ctx.db, domain.id)]);
    return c.html(
      <Shell title={`Domain ${domain.name}`} auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/domains">
        <Records domain={domain} csrfToken={c.get("csrfToken")} />
        <Deliverability domain={domain} rates={rates} sentToday={sentToday} csrfToken={c.get("csrfToken")} />
        <p>
          <a href="/dashboard/domains">← All domains</a>
        </p>
      </Shell>,
    );
  })
  .post("/domains/:id/warmup", liveKeyOnly("Changing a warm-up"), async (c) => {
    const domain = await findDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.param("id"));
    if (!domain) throw notFound("Domain");
    const form = await c.req.parseBody();
    const body = parsedOrThrow(
      warmupInput,
      { enabled: field(form, "enabled") === "true", preset: field(form, "preset") || undefined },
      "The warm-up cannot be changed",
    );
    await setWarmup(c.var.ctx, domain, { enabled: body.enabled, preset: body.preset });
    return c.redirect(`/dashboard/domains/${domain.id}`, 303);
  })
  .post("/domains/:id/verify", async (c) => {
    const domain = await findDomain(c.var.ctx.shared, c.get("auth").account.id, c.req.param("id"));
    if (!domain) throw notFound("Domain");
    const checked = await verifyDomain(c.var.ctx.shared, domain, c.env);
    if (c.req.header("HX-Request") === "true") {
      return c.html(
        <>
          <Records domain={checked} csrfToken={c.get("csrfToken")} />
          {checked.status === "verified" ? null : <Notice kind="warn">Not verified yet: DKIM and SPF must both be found.</Notice>}
        </>,
      );
    }
    return c.redirect(`/dashboard/domains/${checked.id}`, 303);
  });
