import type { AccountDb } from "../db/client";
import {
  contactStatuses,
  deleteContact as removeContact,
  findContact,
  givenTextFields,
  listContacts as findContacts,
  saveContact,
  serializeContactsWithTopics,
} from "../domain/contacts/contacts";
import { contactAddress } from "../domain/contacts/email";
import {
  contactChangeInput,
  contactImportForm,
  contactImportInput,
  contactInput,
  contactsVerifyInput,
  importMapping,
} from "../domain/contacts/input";
import { contactChecksNeeded, createContactChecks, selectContacts, type ContactSelection } from "../domain/contacts/verify";
import { enqueueVerificationJob } from "../domain/verification/jobs";
import { insufficientVerifyCredits, verificationQueueUnavailable } from "../http/verification";
import { createContactImport, findContactImport, serializeContactImport } from "../domain/contacts/import-accept";
import type { ImportMapping } from "../domain/contacts/import-columns";
import { decodeBase64DataUri, UploadError } from "../lib/csv-upload";
import { AppError, notFound, validationError } from "../errors";
import { orRefuse } from "../http/refusals";
import { addressOf, patchContactOrThrow } from "../http/contacts";
import { setTopicChoices, unknownTopics } from "../domain/topics/topics";
import { createRouter, errorResponse, IdParam, jsonBody, jsonResponse, keyedRoute, paginated, PaginationQuery, Timestamp, z } from "../lib/openapi";
import { pageOf } from "../lib/pagination";
import { VERIFICATION_RESULTS } from "../domain/verification/status";

export const ContactSchema = z
  .object({
    id: z.string().openapi({ example: "con_3kTz9Qm1bX7cV2nL8pR4sD" }),
    email: z.string(),
    first_name: z.string().nullable(),
    last_name: z.string().nullable(),
    company: z.string().nullable(),
    phone: z.string().nullable(),
    country: z.string().nullable(),
    custom_fields: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    status: z.enum(contactStatuses).openapi({
      description:
        "Suppressed addresses are stored `unsubscribed`; bounces and complaints set `bounced` / `complained`; `pending` until a double opt-in sign-up is confirmed",
    }),
    lists: z.array(z.string()).openapi({ description: "Ids of the lists the contact is in" }),
    consent: z
      .object({
        form_id: z.string(),
        at: Timestamp,
        ip: z.string().nullable().openapi({ description: "The IP address that confirmed (double opt-in) or posted the form" }),
      })
      .nullable()
      .openapi({ description: "How the contact consented through a sign-up form (POST /forms), when it did" }),
    verification: z
      .object({
        result: z.enum(VERIFICATION_RESULTS),
        status: z.string().nullable().openapi({ description: "The engine status (docs/verification.md), e.g. `mailbox_not_found`" }),
        sub_status: z.string().nullable(),
        checked_at: Timestamp,
      })
      .nullable()
      .openapi({
        description:
          "The address's last verification in this account (POST /verify, a bulk job, the standalone API, POST /contacts/verify or a campaign's checks); null until one ran",
      }),
    topics: z.record(z.string(), z.boolean()).openapi({
      description: "Every topic of the account (GET /topics) by id: whether the contact is subscribed (its choice, else the topic's default)",
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("Contact");

const ContactListQuery = PaginationQuery.extend({
  email: z
    .string()
    .max(320)
    .optional()
    .openapi({
      param: { name: "email", in: "query" },
      description: "Look one contact up by address (domain compared without case). Answers a list of 0 or 1 contact.",
    }),
  search: z
    .string()
    .trim()
    .min(1)
    .max(320)
    .optional()
    .openapi({
      param: { name: "search", in: "query" },
      description: "Contacts whose address or full name contains this text, without case (ASCII letters)",
    }),
  list_id: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .openapi({ param: { name: "list_id", in: "query" } }),
  status: z
    .enum(contactStatuses)
    .optional()
    .openapi({ param: { name: "status", in: "query" } }),
  created_after: z
    .union([z.iso.datetime({ offset: true }), z.iso.date()])
    .optional()
    .openapi({ param: { name: "created_after", in: "query" }, description: "ISO 8601 date-time or date (UTC midnight)" }),
});

const ContactImportSchema = z
  .object({
    id: z.string().openapi({ example: "imp_7bQ2mX9kL1cV4nT8pR3sZa" }),
    status: z.enum(["pending", "processing", "completed", "failed"]),
    list_id: z.string().nullable(),
    total: z.number().int().openapi({ description: "Rows below the header (blank lines not counted)" }),
    processed: z.number().int(),
    created: z.number().int(),
    updated: z.number().int(),
    failed: z.number().int(),
    error: z.string().nullable().openapi({ description: "Why the whole import failed, when it did" }),
    errors: z
      .array(z.object({ row: z.number().int(), message: z.string() }))
      .openapi({ description: "The first 100 rejected rows; `row` counts as a spreadsheet does (the header is row 1)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .openapi("ContactImport");

const ContactChecksSchema = z
  .object({
    id: z.string().nullable().openapi({ description: "The verification job (GET /verify/{id}); null when every address had a fresh result" }),
    status: z.enum(["pending", "completed"]),
    total: z.number().int().openapi({ description: "Addresses checked now: those without a result younger than VERIFY_FRESH_DAYS" }),
    fresh: z.number().int().openapi({ description: "Contacts whose fresh result is reused, free" }),
    credits_charged: z.number().int(),
  })
  .openapi("ContactChecks");

const verifyContacts = keyedRoute(
  "contacts",
  {
    method: "post",
    path: "/contacts/verify",
    tags: ["Contacts"],
    summary: "Verify the addresses of a list, a segment or every subscribed contact",
    description:
      "A bulk verification job over the selected subscribed contacts whose address has no result younger than VERIFY_FRESH_DAYS (30 days by default): " +
      "1 verification credit each, fresh results reused free. Each result is written onto its contact (`verification`). At most 50,000 addresses per request.",
    request: { body: jsonBody(contactsVerifyInput) },
    responses: {
      200: jsonResponse(ContactChecksSchema, "Every selected address had a fresh result: nothing to check"),
      202: jsonResponse(ContactChecksSchema, "The job was accepted; poll GET /verify/{id}"),
      402: errorResponse("`insufficient_credits`: fewer verification credits than addresses to check; nothing was charged"),
      404: errorResponse("No such list or segment"),
      422: errorResponse("Not exactly one of list_id, segment_id, all; or more than 50,000 addresses to check"),
    },
  },
  { liveKeyOnly: "Verifying contacts" },
);

const createContact = keyedRoute(
  "contacts",
  {
    method: "post",
    path: "/contacts",
    tags: ["Contacts"],
    summary: "Create a contact, or update the one with this address",
    description:
      "The address is the key: trimmed, and its domain compared without case (`Jane@Example.com` updates `Jane@example.com`). " +
      "Given fields replace the stored ones, `custom_fields` are merged, `lists` are added. A suppressed address is stored `unsubscribed`.",
    request: { body: jsonBody(contactInput) },
    responses: {
      200: jsonResponse(ContactSchema, "The contact existed and was updated"),
      201: jsonResponse(ContactSchema, "The contact was created"),
    },
  },
  { liveKeyOnly: "Creating a contact" },
);

const listContacts = keyedRoute("contacts", {
  method: "get",
  path: "/contacts",
  tags: ["Contacts"],
  summary: "List contacts, newest first, or look one up by `email`",
  request: { query: ContactListQuery },
  responses: { 200: jsonResponse(paginated(ContactSchema, "ContactPage"), "A page of contacts"), 404: errorResponse("No such list (`list_id`)") },
});

const getContact = keyedRoute("contacts", {
  method: "get",
  path: "/contacts/{id}",
  tags: ["Contacts"],
  summary: "One contact",
  request: { params: IdParam("con") },
  responses: { 200: jsonResponse(ContactSchema, "The contact"), 404: errorResponse("No such contact") },
});

const updateContact = keyedRoute(
  "contacts",
  {
    method: "patch",
    path: "/contacts/{id}",
    tags: ["Contacts"],
    summary: "Change a contact's fields, address or subscription",
    request: { params: IdParam("con"), body: jsonBody(contactChangeInput) },
    responses: {
      200: jsonResponse(ContactSchema, "The contact as changed"),
      404: errorResponse("No such contact"),
      409: errorResponse("Another contact has this address"),
    },
  },
  { liveKeyOnly: "Changing a contact" },
);

const deleteContact = keyedRoute(
  "contacts",
  {
    method: "delete",
    path: "/contacts/{id}",
    tags: ["Contacts"],
    summary: "Delete a contact and its list memberships",
    description: "Removes the personal data. A suppression of the address stays, so it is still never mailed.",
    request: { params: IdParam("con") },
    responses: { 200: jsonResponse(z.object({ id: z.string(), deleted: z.literal(true) }), "Deleted"), 404: errorResponse("No such contact") },
  },
  { liveKeyOnly: "Deleting a contact" },
);

const importContacts = keyedRoute(
  "contacts",
  {
    method: "post",
    path: "/contacts/import",
    tags: ["Contacts"],
    summary: "Import contacts from a CSV file",
    description:
      "Send the CSV as multipart/form-data (`file`, optional `mapping` as JSON, `list_id`) or as JSON with a data URI. " +
      "UTF-8, comma, semicolon or tab separated, header row first. The header and mapping are checked now (422); rows are imported " +
      "in the background, each created or updated by address; poll `GET /contacts/import/{id}`. Empty cells leave stored values alone.",
    request: {
      body: {
        required: false,
        content: { "multipart/form-data": { schema: contactImportForm }, "application/json": { schema: contactImportInput } },
      },
    },
    responses: { 202: jsonResponse(ContactImportSchema, "Accepted; `status` is `pending`"), 413: errorResponse("The file is larger than 50 MB") },
  },
  { liveKeyOnly: "Importing contacts" },
);

const getImport = keyedRoute("contacts", {
  method: "get",
  path: "/contacts/import/{id}",
  tags: ["Contacts"],
  summary: "Progress and result of an import",
  request: { params: IdParam("imp") },
  responses: { 200: jsonResponse(ContactImportSchema, "The import"), 404: errorResponse("No such import") },
});

function parseMappingField(raw: string): ImportMapping {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw validationError({ mapping: ['Send the mapping as a JSON object, e.g. {"email": "E-mail"}'] });
  }
  const result = importMapping.safeParse(parsed);
  if (!result.success) throw validationError({ mapping: result.error.issues.map((issue) => issue.message) });
  return result.data;
}

function decodeCsvDataUri(file: string): Uint8Array {
  try {
    return decodeBase64DataUri(file).bytes;
  } catch (error) {
    if (error instanceof UploadError) throw validationError({ file: [error.message] }, `The file cannot be read: ${error.message}`);
    throw error;
  }
}

/** Topic choices are checked before anything is written, so a request naming an unknown topic changes nothing. */
async function checkTopics(db: AccountDb, accountId: string, choices: Record<string, boolean> | undefined) {
  const unknown = await unknownTopics(db, accountId, Object.keys(choices ?? {}));
  if (unknown.length > 0) throw validationError(Object.fromEntries(unknown.map((id) => [`topics.${id}`, [`No topic ${id} in this account`]])));
}

export const contactRoutes = createRouter()
  .openapi(verifyContacts, async (c) => {
    const body = c.req.valid("json");
    const { account } = c.get("auth");
    const selection: ContactSelection = body.list_id ? { list_id: body.list_id } : body.segment_id ? { segment_id: body.segment_id } : { all: true };
    const where = await selectContacts(c.var.ctx.db, account.id, selection);
    if (!where) throw notFound(body.list_id ? "List" : "Segment");
    const needed = await contactChecksNeeded(c.var.ctx, where);
    const checks = await createContactChecks(c.var.ctx, account, where, { source: "contacts", name: `contacts ${Object.values(selection)[0]}` });
    if (checks.kind === "insufficient_credits") throw insufficientVerifyCredits(checks);
    if (checks.kind === "too_many") throw validationError({ list_id: ["More than 50,000 addresses to check: verify a smaller list or segment"] });
    if (checks.kind === "none") return c.json({ id: null, status: "completed" as const, total: 0, fresh: needed.fresh, credits_charged: 0 }, 200);
    const { job, plan } = checks;
    if ((await enqueueVerificationJob(c.var.ctx, job, plan.chunks)) === "queue_unavailable") throw verificationQueueUnavailable();
    c.header("Location", `/api/v1/verify/${job.id}`);
    return c.json({ id: job.id, status: "pending" as const, total: job.total, fresh: needed.fresh, credits_charged: job.creditsCharged }, 202);
  })
  .openapi(createContact, async (c) => {
    const body = c.req.valid("json");
    const accountId = c.get("auth").account.id;
    await checkTopics(c.var.ctx.db, accountId, body.topics);
    const outcome = await saveContact(c.var.ctx.db, accountId, {
      address: addressOf(body.email),
      fields: givenTextFields(body),
      customFields: body.custom_fields,
      listIds: body.lists ?? [],
    });
    if (outcome.kind === "invalid") throw validationError(outcome.errors);
    if (body.topics) orRefuse(await setTopicChoices(c.var.ctx.db, accountId, outcome.contact.id, body.topics));
    const [contact] = await serializeContactsWithTopics(c.var.ctx.db, accountId, [outcome.contact]);
    return c.json(contact!, outcome.created ? 201 : 200);
  })
  .openapi(listContacts, async (c) => {
    const query = c.req.valid("query");
    let emailKey: string | undefined;
    if (query.email !== undefined) {
      const address = contactAddress(query.email);
      if ("error" in address) throw validationError({ "query.email": [address.error] });
      emailKey = address.key;
    }
    const outcome = await findContacts(
      c.var.ctx.db,
      c.get("auth").account.id,
      {
        emailKey,
        status: query.status,
        createdAfter: query.created_after && new Date(query.created_after).toISOString(),
        listId: query.list_id,
        search: query.search,
      },
      { cursor: query.cursor, limit: query.limit },
    );
    if (outcome.kind === "list_not_found") throw notFound("List");
    const { data, ...page } = pageOf(outcome.rows, query.limit, (row) => row);
    return c.json({ data: await serializeContactsWithTopics(c.var.ctx.db, c.get("auth").account.id, data), ...page }, 200);
  })
  .openapi(getContact, async (c) => {
    const accountId = c.get("auth").account.id;
    const row = await findContact(c.var.ctx.db, accountId, c.req.valid("param").id);
    if (!row) throw notFound("Contact");
    const [contact] = await serializeContactsWithTopics(c.var.ctx.db, accountId, [row]);
    return c.json(contact!, 200);
  })
  .openapi(updateContact, async (c) => {
    const { topics, ...body } = c.req.valid("json");
    const accountId = c.get("auth").account.id;
    const id = c.req.valid("param").id;
    await checkTopics(c.var.ctx.db, accountId, topics);
    // A body of topics alone changes no field: the contact must still exist.
    let saved =
      Object.keys(body).length > 0 ? await patchContactOrThrow(c.var.ctx.db, accountId, id, body) : await findContact(c.var.ctx.db, accountId, id);
    if (!saved) throw notFound("Contact");
    if (topics) {
      orRefuse(await setTopicChoices(c.var.ctx.db, accountId, saved.id, topics));
      saved = (await findContact(c.var.ctx.db, accountId, saved.id)) ?? saved;
    }
    const [contact] = await serializeContactsWithTopics(c.var.ctx.db, accountId, [saved]);
    return c.json(contact!, 200);
  })
  .openapi(deleteContact, async (c) => {
    const { id } = c.req.valid("param");
    if (!(await removeContact(c.var.ctx.db, c.get("auth").account.id, id))) throw notFound("Contact");
    return c.json({ id, deleted: true as const }, 200);
  })
  .openapi(importContacts, async (c) => {
    const contentType = c.req.header("content-type") ?? "";
    const account = c.get("auth").account;
    let input: { bytes: Uint8Array; mapping?: ImportMapping; listId?: string; verify?: boolean };
    if (/^multipart\/form-data/i.test(contentType)) {
      const form = c.req.valid("form");
      // The validated type merges both body schemas; the form's own schema guarantees a File and a string here.
      if (!(form.file instanceof File)) throw validationError({ file: ["Attach the CSV file as the `file` field"] });
      input = {
        bytes: new Uint8Array(await form.file.arrayBuffer()),
        ...(typeof form.mapping === "string" ? { mapping: parseMappingField(form.mapping) } : {}),
        ...(form.list_id ? { listId: form.list_id } : {}),
        verify: form.verify === "true",
      };
    } else if (/^application\/json/i.test(contentType)) {
      const body = c.req.valid("json");
      if (typeof body.file !== "string" || typeof body.mapping === "string") throw validationError({ file: ["Send the file as a data URI"] });
      input = {
        bytes: decodeCsvDataUri(body.file),
        ...(body.mapping ? { mapping: body.mapping } : {}),
        ...(body.list_id ? { listId: body.list_id } : {}),
        verify: body.verify === true,
      };
    } else {
      throw validationError({ body: ["Send the CSV as multipart/form-data (field `file`) or as JSON with a data URI in `file`"] });
    }
    const outcome = await createContactImport(c.var.ctx, account, input);
    if (outcome.kind === "invalid") throw validationError(outcome.errors, outcome.message);
    if (outcome.kind === "insufficient_credits") {
      throw new AppError(
        "insufficient_credits",
        `Verifying this import needs up to ${outcome.needed} verification credits (one a row); ${outcome.available} available`,
      );
    }
    if (outcome.kind === "queue_unavailable") {
      throw new AppError("upstream_unavailable", "The import queue is unavailable; nothing was imported, retry shortly", {
        headers: { "Retry-After": "5" },
      });
    }
    return c.json(serializeContactImport({ ...outcome.contactImport, errors: [] }), 202);
  })
  .openapi(getImport, async (c) => {
    const found = await findContactImport(c.var.ctx.db, c.get("auth").account.id, c.req.valid("param").id);
    if (!found) throw notFound("Import");
    return c.json(serializeContactImport(found), 200);
  });
