// The steps of an automation, run in order for one contact. Checked twice: their shape by zod when the automation is
// saved (the API) and when a run starts (the workflow reads the snapshot the run took), and their references
// (template, sender, lists, segment-style conditions) against the account when saved.

import { z } from "zod";
import { messageStreams } from "../../db/schema";
import { contactTextFields } from "../contacts/contacts";

const id = z.string().min(1).max(64);
export const MAX_WAIT_SECONDS = 365 * 24 * 60 * 60;

const contactFieldsSchema = z
  .object(Object.fromEntries(contactTextFields.map((field) => [field, z.string().trim().max(256).nullable().optional()])))
  .strict();

export const stepSchema = z.discriminatedUnion("type", [
  z
    .object({
      type: z.literal("send_email"),
      sender_id: id,
      // Broadcast by default (docs/streams.md): a welcome series is marketing; a transactional step is mail the
      // contact needs whatever their marketing choices (an order update), and still skips suppressed addresses.
      stream: z.enum(messageStreams).optional(),
      topic_id: id.optional(),
      template_id: id.optional(),
      subject: z.string().min(1).max(998).optional(),
      html: z
        .string()
        .max(512 * 1024)
        .optional(),
      text: z
        .string()
        .max(512 * 1024)
        .optional(),
    })
    .strict()
    .refine((step) => (step.template_id === undefined) !== (step.subject === undefined), {
      message: "Give either template_id, or subject with html and/or text",
    })
    .refine((step) => step.template_id !== undefined || step.html !== undefined || step.text !== undefined, {
      message: "A send_email step without a template needs html or text",
    }),
  z
    .object({
      type: z.literal("wait"),
      seconds: z.int().min(1).max(MAX_WAIT_SECONDS).optional(),
      until: z.iso.datetime({ offset: true }).optional(),
    })
    .strict()
    .refine((step) => (step.seconds === undefined) !== (step.until === undefined), { message: "Give either seconds or until" }),
  z.object({ type: z.literal("add_to_list"), list_id: id }).strict(),
  z.object({ type: z.literal("remove_from_list"), list_id: id }).strict(),
  z
    .object({
      type: z.literal("update_contact"),
      fields: contactFieldsSchema.optional(),
      custom_fields: z.record(z.string().min(1).max(64), z.union([z.string().max(2048), z.number(), z.boolean(), z.null()])).optional(),
    })
    .strict()
    .refine((step) => step.fields !== undefined || step.custom_fields !== undefined, { message: "Give fields and/or custom_fields" }),
  z
    .object({
      type: z.literal("condition"),
      match: z.enum(["all", "any"]),
      conditions: z
        .array(z.object({ field: z.string(), op: z.string(), value: z.unknown().optional() }))
        .min(1)
        .max(20),
    })
    .strict(),
  z.object({ type: z.literal("webhook"), url: z.url().max(2048) }).strict(),
  // Checks the contact's address (a fresh result on the contact is reused) and ends the run when it is invalid.
  z.object({ type: z.literal("verify") }).strict(),
]);

export type Step = z.infer<typeof stepSchema>;
export const stepsSchema = z.array(stepSchema).min(1).max(50);
