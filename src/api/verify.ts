import { notFound, validationError } from "../errors";
import { insufficientVerifyCredits, verificationQueueUnavailable } from "../http/verification";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { createVerificationJob, enqueueVerificationJob } from "../domain/verification/jobs";
import { findJob, JOB_STATUSES, jobSummary, listJobResults, type VerificationJob } from "../domain/verification/job-rows";
import { jobCsvColumns, jobCsvRow, jobResultsCsv } from "../domain/verification/results-csv";
import { verifyInput } from "../domain/verification/input";
import { verifySingleAddress } from "../domain/verification/single";
import { verificationResultSchema } from "../domain/verification/status";

const SingleResultSchema = verificationResultSchema
  .extend({
    credits_charged: z.number().int().openapi({ description: "1, or 0 for bad syntax (free)" }),
    checked_at: Timestamp,
  })
  .openapi("VerificationResult");

const JobAcceptedSchema = z
  .object({
    id: z.string().openapi({ example: "vjob_3kQ9dLx0Zr2Ab7Yc1Nm4Pt" }),
    status: z.literal("pending"),
    total: z.number().int(),
    credits_charged: z.number().int().openapi({ description: "Distinct addresses with valid syntax; duplicates and bad syntax are free" }),
  })
  .openapi("VerificationJobAccepted");

const CountsSchema = z
  .object({
    valid: z.number().int(),
    invalid: z.number().int().openapi({ description: "Includes bad syntax" }),
    risky: z.number().int(),
    unknown: z.number().int(),
    duplicates: z.number().int().openapi({ description: "Inputs repeating an earlier one (same dedupe key); free, not verified again" }),
    bad_syntax: z.number().int().openapi({ description: "Distinct inputs that are not addresses; free" }),
  })
  .openapi("VerificationJobCounts");

const JobResultSchema = verificationResultSchema
  .extend({
    position: z.number().int().openapi({ description: "0-based index of the address in the request" }),
    checked_at: Timestamp,
    duplicate_of: z.number().int().optional().openapi({ description: "Only on duplicate rows of standalone batches: the position repeated" }),
  })
  .openapi("VerificationJobResult");

const JobSchema = z
  .object({
    id: z.string(),
    status: z.enum(JOB_STATUSES),
    total: z.number().int(),
    processed: z.number().int().openapi({ description: "Inputs done, duplicates included; equals total when completed" }),
    counts: CountsSchema,
    credits_charged: z.number().int().openapi({ description: "Net of the refund a failed job gets for what it did not verify" }),
    error: z.string().nullable(),
    created_at: Timestamp,
    completed_at: Timestamp.nullable(),
    results: paginated(JobResultSchema, "VerificationJobResultPage"),
  })
  .openapi("VerificationJob");

const verify = keyedRoute("verify", {
  method: "post",
  path: "/verify",
  tags: ["Verification"],
  summary: "Verify one address, or start a bulk job",
  description:
    "`{email}`: verified synchronously (syntax, DNS MX/A, disposable, role, free provider, typo), 1 verification credit, " +
    "bad syntax is free. `{emails}`: a job of up to 50,000 addresses, answered 202 and polled with GET /verify/{id}; it costs 1 " +
    "credit per distinct address with valid syntax, charged at acceptance (duplicates and bad syntax are free), and is refused " +
    "with 402 before any work when the balance cannot pay for it.",
  request: { body: jsonBody(verifyInput) },
  responses: {
    200: jsonResponse(SingleResultSchema, "The single result"),
    202: jsonResponse(JobAcceptedSchema, "The job was accepted; poll GET /verify/{id}"),
    402: errorResponse("Not enough verification credits"),
    413: errorResponse("Body larger than 5 MB"),
  },
});

const JobQuery = PaginationQuery.extend({
  // Results are paged by their position in the upload, not by (created_at, id).
  cursor: z
    .string()
    .max(200)
    .optional()
    .openapi({ param: { name: "cursor", in: "query" } }),
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(1000)
    .default(100)
    .openapi({ param: { name: "limit", in: "query" } }),
  format: z
    .enum(["json", "csv"])
    .default("json")
    .openapi({ param: { name: "format", in: "query" }, description: "`csv`: every result as a CSV file (one row per distinct input)" }),
});

const getJob = keyedRoute("verify", {
  method: "get",
  path: "/verify/{id}",
  tags: ["Verification"],
  summary: "Poll a bulk job and page through its results",
  description: "Results come in input order, `limit` (default 100, max 1,000) at a time. `?format=csv` streams them all as CSV.",
  request: { params: IdParam("vjob"), query: JobQuery },
  responses: {
    200: {
      description: "The job, with a page of results (JSON) or all of them (CSV)",
      content: { "application/json": { schema: JobSchema }, "text/csv": { schema: z.string() } },
    },
    404: errorResponse("No such job in this account"),
  },
});

// Results are keyed by position, so the cursor is the last position served (opaque to clients).
const encodePositionCursor = (position: number) => btoa(`pos:${position}`).replace(/=+$/, "");
function decodePositionCursor(cursor: string): number {
  try {
    const match = /^pos:(\d{1,9})$/.exec(atob(cursor));
    if (match) return Number(match[1]);
  } catch {
    // falls through to the validation error below
  }
  throw validationError({ "query.cursor": ["Invalid cursor; pass next_cursor from the previous page"] });
}

const serializeJob = (job: VerificationJob) => ({ id: job.id, ...jobSummary(job) });

export const verifyRoutes = createRouter()
  .openapi(verify, async (c) => {
    const body = c.req.valid("json");
    const { account } = c.get("auth");
    if (body.emails !== undefined) {
      const created = await createVerificationJob(c.var.ctx, { account, emails: body.emails, source: "api" });
      if (created.kind === "insufficient_credits") throw insufficientVerifyCredits(created);
      const { job, plan } = created;
      if ((await enqueueVerificationJob(c.var.ctx, job, plan.chunks)) === "queue_unavailable") throw verificationQueueUnavailable();
      c.header("Location", `/api/v1/verify/${job.id}`);
      return c.json({ id: job.id, status: "pending" as const, total: job.total, credits_charged: job.creditsCharged }, 202);
    }
    // superRefine guarantees exactly one of the two.
    const check = await verifySingleAddress(c.var.ctx, account, body.email!, {
      reference: c.get("requestId"),
      emitEvent: body.emit_event,
      waitUntil: c.var.ctx.waitUntil,
    });
    if (check.kind === "insufficient_credits") throw insufficientVerifyCredits(check);
    return c.json({ ...check.result, credits_charged: check.creditsCharged, checked_at: check.checkedAt }, 200);
  })
  .openapi(getJob, async (c) => {
    const { id } = c.req.valid("param");
    const query = c.req.valid("query");
    const job = await findJob(c.var.ctx.db, { id }, c.get("auth").account.id);
    if (!job) throw notFound("Verification job");
    if (query.format === "csv") {
      return c.body(jobResultsCsv(c.var.ctx.db, job.id, jobCsvColumns, jobCsvRow), 200, {
        "Content-Type": "text/csv; charset=utf-8",
        "Content-Disposition": `attachment; filename="${job.id}.csv"`,
      });
    }
    const after = query.cursor ? decodePositionCursor(query.cursor) : -1;
    const rows = await listJobResults(c.var.ctx.db, job.id, after, query.limit + 1);
    const page = rows.slice(0, query.limit);
    const hasMore = rows.length > query.limit;
    const last = page.at(-1);
    return c.json(
      {
        ...serializeJob(job),
        results: {
          data: page.map(({ position, result }) => ({ ...result, position })),
          has_more: hasMore,
          next_cursor: hasMore && last ? encodePositionCursor(last.position) : null,
        },
      },
      200,
    );
  });
