// The request bodies of the contacts and lists APIs, parsed by the API routes, the dashboard's forms and the
// automation trigger alike.

import { evenWithFieldErrors, z } from "../../lib/schema";
import { CONTACT_TEXT_MAX_LENGTH, CUSTOM_FIELD_KEY_MAX_LENGTH, customFieldsProblem } from "./contacts";
import { contactAddress } from "./email";

/** An address as a contact takes it; the error names the broken rule. */
export const contactEmail = z
  .string()
  .max(320)
  .superRefine((value, ctx) => {
    const address = contactAddress(value);
    if ("error" in address) ctx.addIssue({ code: "custom", message: address.error });
  })
  .openapi({ example: "jane@example.com" });

const textField = z
  .string()
  .trim()
  .max(CONTACT_TEXT_MAX_LENGTH)
  .nullable()
  .optional()
  .openapi({ description: "On update, `null` or an empty string clears the field; leaving it out keeps it" });

const customFieldValue = z.union([z.string().max(2048), z.number(), z.boolean(), z.null()], {
  error: "Custom field values are strings, numbers, booleans or null (to remove the field); objects and arrays are not allowed",
});

export const customFields = z
  .record(z.string().min(1).max(CUSTOM_FIELD_KEY_MAX_LENGTH), customFieldValue)
  .superRefine((patch, ctx) => {
    const problem = customFieldsProblem(patch);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  })
  .openapi({
    description:
      "Flat object of strings, numbers and booleans (at most 50 keys, 8 KB as JSON). Merged into the stored fields on update; `null` removes a key.",
    example: { plan: "pro", seats: 12, trial: false },
  });

const listIds = z.array(z.string().min(1).max(64)).max(100).openapi({ description: "Ids of lists to add the contact to" });

const topicChoices = z
  .record(z.string().min(1).max(64), z.boolean())
  .refine((choices) => Object.keys(choices).length <= 50, "At most 50 topics")
  .openapi({
    description: "Subscription per topic id (GET /topics): true subscribes, false unsubscribes; topics left out keep their value",
    example: { top_4bT9xQ2mLk7vN1cZ8pR3sW: false },
  });

/** The body of POST /contacts. */
export const contactInput = z
  .object({
    email: contactEmail,
    first_name: textField,
    last_name: textField,
    company: textField,
    phone: textField,
    country: textField,
    custom_fields: customFields.optional(),
    lists: listIds.optional(),
    topics: topicChoices.optional(),
  })
  .strict()
  .openapi("ContactInput");

/** The body of PATCH /contacts/{id}: the fields to change. */
export const contactChangeInput = z
  .object({
    email: contactEmail.optional(),
    first_name: textField,
    last_name: textField,
    company: textField,
    phone: textField,
    country: textField,
    custom_fields: customFields.optional(),
    status: z
      .enum(["subscribed", "unsubscribed"])
      .optional()
      .openapi({ description: "Resubscribe or unsubscribe from campaigns. A suppressed address cannot be resubscribed." }),
    topics: topicChoices.optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send at least one field to change" })
  .openapi("ContactPatch");

/** Contact field → CSV column header, for an import. */
export const importMapping = z.record(z.string().min(1).max(100), z.string().min(1).max(200)).openapi({
  description:
    "Contact field → header of the CSV column. Fields: `email` (required), `first_name`, `last_name`, `company`, `phone`, `country`, `custom_fields.<name>`, " +
    "`topics` (topic names or ids separated by `;`, `|` or `,`: the contact is subscribed to them; an unknown one fails the row). " +
    "Without a mapping, columns whose header names a contact field (`Email`, `E-mail`, `First name`, `Topics`, …) are imported and the others ignored.",
  example: { email: "E-mail", first_name: "First", "custom_fields.plan": "Plan" },
});

/** The JSON body of POST /contacts/import. */
export const contactImportInput = z
  .object({
    file: z.string().min(1).openapi({ description: "The CSV as a data URI: `data:text/csv;base64,…`" }),
    mapping: importMapping.optional(),
    list_id: z.string().min(1).max(64).optional().openapi({ description: "Add every imported contact to this list" }),
    verify: z
      .boolean()
      .optional()
      .openapi({
        description:
          "Check the imported addresses that have no fresh result (VERIFY_FRESH_DAYS) in verification jobs, 1 verification credit each; " +
          "402 when the balance is below the file's row count",
      }),
  })
  .strict()
  .openapi("ContactImportRequest");

/** The multipart body of POST /contacts/import. */
export const contactImportForm = z
  .object({
    file: z.instanceof(File, { message: "Attach the CSV file as the `file` field" }).openapi({ type: "string", format: "binary" }),
    mapping: z.string().max(20_000).optional().openapi({ description: "The mapping as a JSON object (see the JSON form)" }),
    list_id: z.string().min(1).max(64).optional(),
    verify: z.enum(["true", "false"]).optional().openapi({ description: "`true`: as `verify` in the JSON form" }),
  })
  .strict();

/** Contact ids or addresses one POST /lists/{id}/members takes. */
export const MEMBERS_PER_REQUEST = 1000;

/** The body of POST /lists. */
export const listInput = z
  .object({
    name: z.string().trim().min(1).max(200),
    description: z.string().trim().max(1000).nullable().optional(),
  })
  .strict()
  .openapi("CreateList");

/** The body of PATCH /lists/{id}: the fields to change. */
export const listChangeInput = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    description: z.string().trim().max(1000).nullable().optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send name or description" })
  .openapi("UpdateList");

/** The body of POST /lists/{id}/members: contact ids or addresses. */
export const listMembersInput = z
  .object({
    contact_ids: z.array(z.string().min(1).max(64)).min(1).max(MEMBERS_PER_REQUEST).optional(),
    emails: z
      .array(z.string().max(320))
      .min(1)
      .max(MEMBERS_PER_REQUEST)
      .optional()
      .openapi({ description: "Addresses; each is created as a contact if new (stored `unsubscribed` if suppressed)" }),
  })
  .strict()
  .refine((body) => (body.contact_ids === undefined) !== (body.emails === undefined), {
    message: "Send either contact_ids or emails",
    ...evenWithFieldErrors,
  })
  .openapi("AddListMembers");

/** The body of POST /contacts/verify: which subscribed contacts to check, exactly one of the three. */
export const contactsVerifyInput = z
  .object({
    list_id: z.string().min(1).max(64).optional().openapi({ description: "The subscribed contacts of this list" }),
    segment_id: z.string().min(1).max(64).optional().openapi({ description: "The subscribed contacts this segment matches" }),
    all: z.literal(true).optional().openapi({ description: "Every subscribed contact" }),
  })
  .strict()
  .superRefine((body, ctx) => {
    const given = [body.list_id, body.segment_id, body.all].filter((value) => value !== undefined).length;
    if (given !== 1) ctx.addIssue({ code: "custom", path: ["list_id"], message: "Give exactly one of list_id, segment_id or all: true" });
  })
  .openapi("VerifyContacts");
