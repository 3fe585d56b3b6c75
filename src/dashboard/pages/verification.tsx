import { Hono } from "hono";
import Papa from "papaparse";
import { findBalances } from "../../domain/accounts/accounts";
import { createVerificationJob, enqueueVerificationJob, MAX_JOB_ADDRESSES } from "../../domain/verification/jobs";
import { findJob, jobCounts, listJobs, type VerificationJob } from "../../domain/verification/job-rows";
import { jobCsvColumns, jobCsvRow, jobResultsCsv } from "../../domain/verification/results-csv";
import { verifyInput } from "../../domain/verification/input";
import { verifySingleAddress } from "../../domain/verification/single";
import { insufficientVerifyCredits, verificationQueueUnavailable } from "../../http/verification";
import { AppError, notFound } from "../../errors";
import { parsedOrThrow } from "../guard";
import { Table } from "../components/table";
import { Csrf, Notice, Progress, Shell, StatusBadge, formatTime } from "../layout";
import type { DashboardEnv } from "../session";

// An uploaded file is read whole in memory: 50,000 addresses of a few columns stay far below this.
const maxUploadBytes = 5 * 1024 * 1024;

/**
 * The addresses of an uploaded CSV: the column headed `email` (any case), else the first column; a first row that
 * holds no `@` is taken as a header.
 */
export function addressesFromCsv(text: string): string[] {
  const rows = Papa.parse<string[]>(text.replace(/^\uFEFF/, ""), { skipEmptyLines: "greedy" }).data;
  if (rows.length === 0) return [];
  const header = rows[0]!.map((cell) => cell.trim().toLowerCase());
  const named = header.findIndex((cell) => cell === "email" || cell === "email address" || cell === "e-mail");
  const column = Math.max(0, named);
  const hasHeader = named >= 0 || !header.some((cell) => cell.includes("@"));
  return rows
    .slice(hasHeader ? 1 : 0)
    .map((row) => row[column]?.trim() ?? "")
    .filter(Boolean);
}

const finished = (job: VerificationJob) => job.status === "completed" || job.status === "failed";

/** The job's progress; while it runs it polls itself every second and replaces itself (htmx). */
function JobProgress({ job }: { job: VerificationJob }) {
  const counts = jobCounts(job);
  return (
    <div
      id={`job-${job.id}`}
      class="job-progress"
      hx-get={finished(job) ? undefined : `/dashboard/verification/${job.id}/progress`}
      hx-trigger={finished(job) ? undefined : "every 1s"}
      hx-swap="outerHTML"
      aria-live="polite"
    >
      <Progress label={`Verification job ${job.name ?? job.id}`} done={job.processed} total={job.total} />
      <p>
        <StatusBadge status={job.status} /> {counts.valid} valid, {counts.invalid} invalid, {counts.risky} risky, {counts.unknown} unknown
        {counts.duplicates ? `, ${counts.duplicates} duplicates` : ""}
      </p>
      {job.error ? <Notice kind="error">{job.error}</Notice> : null}
      {job.status === "completed" ? (
        <p>
          <a class="button" href={`/dashboard/verification/${job.id}/results.csv`} download>
            Download results (CSV)
          </a>
        </p>
      ) : null}
    </div>
  );
}

export const verificationPages = new Hono<DashboardEnv>()
  .get("/verification", async (c) => {
    const auth = c.get("auth");
    const [jobs, balances] = await Promise.all([listJobs(c.var.ctx.db, auth.account.id, 20), findBalances(c.var.ctx.db, auth.account.id)]);
    return c.html(
      <Shell title="Verification" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/verification">
        <div class="grid two">
          <section class="card">
            <h2>Check one address</h2>
            <form
              method="post"
              action="/dashboard/verification/check"
              hx-post="/dashboard/verification/check"
              hx-target="#single-result"
              class="stack"
            >
              <Csrf token={c.get("csrfToken")} />
              <label for="verify-email">Email address</label>
              <input id="verify-email" name="email" type="text" required maxlength={1024} placeholder="jane@example.com" />
              <button type="submit">Verify</button>
            </form>
            <div id="single-result" aria-live="polite" />
          </section>
          <section class="card">
            <h2>Verify a list (CSV)</h2>
            <form method="post" action="/dashboard/verification/upload" enctype="multipart/form-data" class="stack">
              <Csrf token={c.get("csrfToken")} />
              <label for="verify-file">
                CSV file: an <code>email</code> column, or addresses in the first column
              </label>
              <input id="verify-file" name="file" type="file" accept=".csv,text/csv,text/plain" required />
              <p class="hint">
                Up to {MAX_JOB_ADDRESSES.toLocaleString("en")} addresses; 1 credit per distinct address with valid syntax. You have{" "}
                {balances.verifyBalance.toLocaleString("en")} verification credits.
              </p>
              <button type="submit">Upload and verify</button>
            </form>
          </section>
        </div>
        <section class="card">
          <h2>Recent jobs</h2>
          <Table
            head={["Job", "Status", "Addresses", "Created"]}
            rows={jobs}
            empty="No bulk verification jobs yet."
            row={(job) => (
              <tr>
                <td>
                  <a href={`/dashboard/verification/${job.id}`}>{job.name ?? job.id}</a>
                </td>
                <td>
                  <StatusBadge status={job.status} />
                </td>
                <td>
                  {job.processed} / {job.total}
                </td>
                <td>{formatTime(job.createdAt)}</td>
              </tr>
            )}
          />
        </section>
      </Shell>,
    );
  })
  .post("/verification/check", async (c) => {
    const auth = c.get("auth");
    const { email } = parsedOrThrow(verifyInput, { email: (await c.req.parseBody()).email ?? "" }, "The address cannot be verified");
    // verifyInput refuses a body without one.
    const check = await verifySingleAddress(c.var.ctx, auth.account, email!, {
      reference: c.get("requestId"),
      waitUntil: c.var.ctx.waitUntil,
    });
    if (check.kind === "insufficient_credits") throw insufficientVerifyCredits(check);
    const result = check.result;
    const body = (
      <div class="card" data-testid="single-result">
        <p>
          <strong>{result.email}</strong>: <StatusBadge status={result.result} /> {result.status}
          {result.sub_status ? ` (${result.sub_status})` : ""}
        </p>
        <dl class="facts">
          <dt>Score</dt>
          <dd>{result.score}</dd>
          <dt>MX</dt>
          <dd>{result.mx_record ?? (result.mx_found ? "found" : "none")}</dd>
          <dt>Disposable</dt>
          <dd>{result.disposable ? "yes" : "no"}</dd>
          <dt>Role address</dt>
          <dd>{result.role_based ? "yes" : "no"}</dd>
          <dt>Free provider</dt>
          <dd>{result.free_provider ? "yes" : "no"}</dd>
          {result.did_you_mean ? (
            <>
              <dt>Did you mean</dt>
              <dd>{result.did_you_mean}</dd>
            </>
          ) : null}
        </dl>
      </div>
    );
    if (c.req.header("HX-Request") === "true") return c.html(body);
    return c.html(
      <Shell title="Verification result" auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/verification">
        {body}
        <a href="/dashboard/verification">← Verification</a>
      </Shell>,
    );
  })
  .post("/verification/upload", async (c) => {
    const file = (await c.req.parseBody()).file;
    if (!(file instanceof File) || file.size === 0) throw new AppError("validation_failed", "Choose a CSV file to upload");
    if (file.size > maxUploadBytes) throw new AppError("payload_too_large", "The file is larger than 5 MB");
    const found = addressesFromCsv(await file.text());
    if (found.length === 0) throw new AppError("validation_failed", "The file has no addresses");
    const { emails } = parsedOrThrow(verifyInput, { emails: found }, "The file cannot be verified");
    const created = await createVerificationJob(c.var.ctx, {
      account: c.get("auth").account,
      emails: emails!,
      source: "api",
      name: file.name.slice(0, 200) || null,
    });
    if (created.kind === "insufficient_credits") throw insufficientVerifyCredits(created);
    if ((await enqueueVerificationJob(c.var.ctx, created.job, created.plan.chunks)) === "queue_unavailable") throw verificationQueueUnavailable();
    return c.redirect(`/dashboard/verification/${created.job.id}`, 303);
  })
  .get("/verification/:id", async (c) => {
    const auth = c.get("auth");
    const job = await findJob(c.var.ctx.db, { id: c.req.param("id") }, auth.account.id);
    if (!job) throw notFound("Verification job");
    return c.html(
      <Shell title={`Verification job ${job.name ?? job.id}`} auth={auth} csrfToken={c.get("csrfToken")} current="/dashboard/verification">
        <section class="card">
          <h2>Progress</h2>
          <JobProgress job={job} />
          <p class="hint">
            {job.total.toLocaleString("en")} addresses, {job.creditsCharged.toLocaleString("en")} credits charged, started {formatTime(job.createdAt)}
            .
          </p>
        </section>
        <a href="/dashboard/verification">← Verification</a>
      </Shell>,
    );
  })
  .get("/verification/:id/progress", async (c) => {
    const job = await findJob(c.var.ctx.db, { id: c.req.param("id") }, c.get("auth").account.id);
    if (!job) throw notFound("Verification job");
    return c.html(<JobProgress job={job} />);
  })
  .get("/verification/:id/results.csv", async (c) => {
    const job = await findJob(c.var.ctx.db, { id: c.req.param("id") }, c.get("auth").account.id);
    if (!job) throw notFound("Verification job");
    return c.body(jobResultsCsv(c.var.ctx.db, job.id, jobCsvColumns, jobCsvRow), 200, {
      "Content-Type": "text/csv; charset=utf-8",
      "Content-Disposition": `attachment; filename="${job.id}.csv"`,
    });
  });
