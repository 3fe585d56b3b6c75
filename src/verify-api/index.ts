import { createRoute, type RouteConfig } from "@hono/zod-openapi";
import { AppError, notFound } from "../errors";
import { createRouter, errorResponse, jsonBody, jsonResponse, z } from "../lib/openapi";
import { createVerificationJob, enqueueVerificationJob } from "../domain/verification/jobs";
import { findJob, JOB_STATUSES, jobCounts, type VerificationJob } from "../domain/verification/job-rows";
import { jobResultsCsv } from "../domain/verification/results-csv";
import { verifySingleAddress } from "../domain/verification/single";
import { insufficientVerifyCredits, verificationQueueUnavailable } from "../http/verification";
import { VERIFICATION_QUALITIES } from "../domain/verification/status";
import { verifyApiKeyAuth } from "./auth";
import { STANDALONE_STATUSES, toStandaloneResult, withOffset } from "./result";
import { decodeDataUri, readEmailColumn } from "./upload";

// The verification API ({verify_url}, spec: Endpoints): ZeroBounce-style paths without a version, the key in
// `?apikey=`, 5 requests per second per key. Mounted at /api beside /api/v1, so its key check is a per-route
// middleware: a `use("*")` here would also run for every /api/v1 request.

const Timestamp = z.string().openapi({ format: "date-time", example: "2026-11-22T10:15:00.000+00:00" });

const verifyApiErrors = {
  401: errorResponse("Missing or invalid `apikey`"),
  403: errorResponse("The key lacks the `verify` scope"),
  422: errorResponse("Validation failed; `errors` is keyed by field path"),
  429: errorResponse("More than 5 requests per second for this key; see Retry-After"),
} as const;

function verifyApiRoute<R extends Omit<RouteConfig, "middleware" | "security">>(route: R) {
  return createRoute({
    ...route,
    tags: ["Verification API"],
    middleware: [verifyApiKeyAuth],
    security: [{ verifyApiKey: [] }],
    responses: { ...verifyApiErrors, ...route.responses },
  });
}

const StandaloneResultSchema = z
  .object({
    email: z.string().openapi({ example: "jane@example.com" }),
    status: z.enum(STANDALONE_STATUSES).openapi({
      description:
        "valid; invalid (bad syntax, no such domain, null MX, no mail route, no such mailbox, disabled mailbox); catch-all (the domain accepts any mailbox); do_not_mail (disposable, role account, full mailbox); unknown (DNS or the mail server could not tell, greylisting; retry later)",
    }),
    checked_at: Timestamp,
    account: z.string().openapi({ description: "Local part", example: "jane" }),
    domain: z.string().openapi({ example: "example.com" }),
    quality: z.enum(VERIFICATION_QUALITIES).openapi({ description: "safe: send; risky: send with care; bad: do not mail; unknown: retry later" }),
    score: z.number().min(0).max(1).openapi({ example: 0.9 }),
    mx_record: z.string().openapi({
      description: 'The mail exchanger that answered the mailbox check, else the best-priority one; the domain for an implicit MX; "" when none',
      example: "mx1.example.com",
    }),
    did_you_mean: z.string().nullable().openapi({ description: "Corrected address when the domain looks mistyped" }),
    sub_status: z
      .array(z.string())
      .openapi({ description: "Notes, most specific first: engine status, rule or note, flags. [] for a clean address", example: [] }),
  })
  .openapi("StandaloneValidationResult");

const validate = verifyApiRoute({
  method: "get",
  path: "/validate",
  summary: "Validate one address",
  description: "1 verification credit; bad syntax is free.",
  request: {
    query: z.object({
      email: z
        .string()
        .trim()
        .min(1, "Must not be empty")
        .max(1024)
        .openapi({ param: { name: "email", in: "query" }, example: "jane@example.com" }),
      ip_address: z
        .string()
        .max(64)
        .optional()
        .openapi({ param: { name: "ip_address", in: "query" }, description: "Accepted for compatibility; not used" }),
    }),
  },
  responses: {
    200: jsonResponse(StandaloneResultSchema, "The result"),
    402: errorResponse("No verification credits left"),
  },
});

const BatchSchema = z
  .object({
    id: z.number().int().openapi({ example: 42 }),
    name: z.string().openapi({ example: "leads.csv" }),
    status: z.enum(JOB_STATUSES),
    total: z.number().int().openapi({ description: "Rows in the file (header excluded)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Batch");

const BatchStatusSchema = BatchSchema.extend({
  processed: z.number().int(),
  progress: z.number().openapi({ description: "Percent of rows done, 0 to 100" }),
  counts: z.object({
    valid: z.number().int(),
    invalid: z.number().int(),
    risky: z.number().int(),
    unknown: z.number().int(),
    duplicates: z.number().int(),
    bad_syntax: z.number().int(),
  }),
  credits_charged: z.number().int(),
  completed_at: Timestamp.nullable(),
  download_url: z.string().nullable().openapi({ description: "Path of the results CSV once the batch is finished" }),
}).openapi("BatchStatus");

const UploadSchema = z
  .object({
    file: z.string().min(1).openapi({
      description: "data:text/csv;name=<file>;base64,<content>",
      example: "data:text/csv;name=leads.csv;base64,ZW1haWwKamFuZUBleGFtcGxlLmNvbQo=",
    }),
    remove_duplicates: z
      .boolean()
      .default(false)
      .openapi({ description: "Drop repeated addresses from the results file (they are free either way)" }),
    first_row_is_header: z
      .boolean()
      .optional()
      .openapi({ description: "Omitted: the first row is a header when a cell reads email, e-mail or email address" }),
  })
  .strict()
  .openapi("BatchUpload");

const upload = verifyApiRoute({
  method: "post",
  path: "/batch/upload",
  summary: "Upload a CSV of addresses for bulk validation",
  description:
    "The address column is the one headed email / e-mail / email address, else the first. 1 credit per distinct valid-syntax " +
    "address, charged at upload; duplicates and bad syntax are free. Refused with 402 before any work when the balance is short.",
  request: { body: jsonBody(UploadSchema) },
  responses: {
    200: jsonResponse(z.object({ data: BatchSchema, message: z.string() }), "The batch was accepted"),
    402: errorResponse("Not enough verification credits for the file"),
    413: errorResponse("Body larger than 50 MB"),
  },
});

const BatchIdParam = z.object({
  id: z.coerce
    .number()
    .int()
    .positive()
    .openapi({ param: { name: "id", in: "path" }, example: 42 }),
});

const getBatch = verifyApiRoute({
  method: "get",
  path: "/batch/{id}",
  summary: "Status and counts of a batch",
  request: { params: BatchIdParam },
  responses: {
    200: jsonResponse(z.object({ data: BatchStatusSchema }), "The batch"),
    404: errorResponse("No such batch for this key's account"),
  },
});

const downloadBatch = verifyApiRoute({
  method: "get",
  path: "/batch/{id}/download",
  summary: "Results of a finished batch as CSV",
  description:
    "One row per file row in file order (repeats dropped when uploaded with remove_duplicates). A failed batch gives the rows it verified.",
  request: { params: BatchIdParam },
  responses: {
    200: { description: "The results", content: { "text/csv": { schema: z.string() } } },
    404: errorResponse("No such batch for this key's account"),
    409: errorResponse("The batch is still running"),
  },
});

const batchCsvColumns = [
  "email",
  "status",
  "sub_status",
  "account",
  "domain",
  "quality",
  "score",
  "mx_record",
  "did_you_mean",
  "checked_at",
] as const;

function serializeBatch(job: VerificationJob) {
  return {
    id: job.seq,
    name: job.name ?? "",
    status: job.status,
    total: job.total,
    created_at: withOffset(job.createdAt),
    updated_at: withOffset(job.updatedAt),
  };
}

export const verifyApiRoutes = createRouter()
  .openapi(validate, async (c) => {
    const { email } = c.req.valid("query");
    const check = await verifySingleAddress(c.var.ctx, c.get("auth").account, email, {
      reference: c.get("requestId"),
      waitUntil: c.var.ctx.waitUntil,
    });
    if (check.kind === "insufficient_credits") throw insufficientVerifyCredits(check);
    return c.json(toStandaloneResult(check.result, check.checkedAt), 200);
  })
  .openapi(upload, async (c) => {
    const body = c.req.valid("json");
    const file = decodeDataUri(body.file);
    const emails = readEmailColumn(file.text, body.first_row_is_header);
    const created = await createVerificationJob(c.var.ctx, {
      account: c.get("auth").account,
      emails,
      source: "batch",
      name: file.name,
      includeDuplicates: !body.remove_duplicates,
    });
    if (created.kind === "insufficient_credits") throw insufficientVerifyCredits(created);
    const { job, plan } = created;
    if ((await enqueueVerificationJob(c.var.ctx, job, plan.chunks)) === "queue_unavailable") throw verificationQueueUnavailable();
    const message =
      `File accepted: ${plan.total} rows, ${plan.duplicates} duplicates, ${plan.badSyntax} with bad syntax; ` +
      `${plan.chargeable} credits charged. Poll GET /api/batch/${job.seq}.`;
    return c.json({ data: serializeBatch(job), message }, 200);
  })
  .openapi(getBatch, async (c) => {
    const job = await findJob(c.var.ctx.db, { seq: c.req.valid("param").id }, c.get("auth").account.id);
    if (!job) throw notFound("Batch");
    const finished = job.status === "completed" || job.status === "failed";
    return c.json(
      {
        data: {
          ...serializeBatch(job),
          processed: job.processed,
          progress: job.total === 0 ? 100 : Math.floor((job.processed / job.total) * 1000) / 10,
          counts: jobCounts(job),
          credits_charged: job.creditsCharged,
          completed_at: job.completedAt ? withOffset(job.completedAt) : null,
          download_url: finished ? `/api/batch/${job.seq}/download` : null,
        },
      },
      200,
    );
  })
  .openapi(downloadBatch, async (c) => {
    const job = await findJob(c.var.ctx.db, { seq: c.req.valid("param").id }, c.get("auth").account.id);
    if (!job) throw notFound("Batch");
    if (job.status === "pending" || job.status === "processing") {
      throw new AppError("conflict", `The batch is still ${job.status} (${job.processed} of ${job.total} rows); download it once it is completed`);
    }
    const stream = jobResultsCsv(c.var.ctx.db, job.id, batchCsvColumns, ({ result }) => {
      const standalone = toStandaloneResult(result, result.checked_at);
      return batchCsvColumns.map((column) => (column === "sub_status" ? standalone.sub_status.join(";") : standalone[column]));
    });
    const fileName = (job.name ?? `batch-${job.seq}.csv`).replace(/\.csv$/i, "").replace(/[^\w.-]+/g, "_");
    return c.body(stream, 200, {
      "Content-Type": "text/csv; charset=utf-8",
      "Content-Disposition": `attachment; filename="${fileName}-results.csv"`,
    });
  });
