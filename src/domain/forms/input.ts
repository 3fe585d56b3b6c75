// The request bodies of the forms API, parsed by the API routes and the dashboard's form alike, and the fields a
// public sign-up takes.

import { evenWithFieldErrors, z } from "../../lib/schema";
import { CONTACT_TEXT_MAX_LENGTH, contactTextFields } from "../contacts/contacts";
import { contactEmail } from "../contacts/input";

const name = z.string().trim().min(1).max(100).openapi({ example: "Newsletter footer" });
const ids = (max: number) =>
  z
    .array(z.string().min(1).max(64))
    .max(max)
    .transform((values) => [...new Set(values)]);
const lists = ids(20).openapi({ description: "Ids of the lists a sign-up joins (once confirmed, with double opt-in)" });
const topics = ids(50).openapi({ description: "Ids of the topics (GET /topics) a sign-up is subscribed to" });
const senderId = z
  .string()
  .min(1)
  .max(64)
  .nullable()
  .openapi({ description: "The sender (POST /senders) the confirmation email comes from; required with double opt-in" });
const redirectUrl = z
  .url({ protocol: /^https?$/, error: "Must be an http(s) URL" })
  .max(2000)
  .nullable()
  .openapi({ description: "Where a browser that posted the form is sent (303) afterwards", example: "https://example.com/thanks" });
const fields = z
  .array(z.enum(contactTextFields))
  .max(contactTextFields.length)
  .transform((values) => [...new Set(values)])
  .openapi({ description: "The contact fields the form takes besides `email`; others posted are ignored" });

export const SENDER_REQUIRED = "A double opt-in form needs a sender for its confirmation email";

/** The body of POST /forms. */
export const formInput = z
  .object({
    name,
    lists: lists.default([]),
    topics: topics.default([]),
    double_opt_in: z.boolean().default(true).openapi({
      description: "Whether a sign-up must confirm by a link mailed to it (the contact is `pending` until then), or is subscribed at once",
    }),
    sender_id: senderId.optional(),
    redirect_url: redirectUrl.optional(),
    fields: fields.default([]),
  })
  .strict()
  .superRefine((body, ctx) => {
    if (body.double_opt_in !== false && !body.sender_id) ctx.addIssue({ code: "custom", path: ["sender_id"], message: SENDER_REQUIRED });
  }, evenWithFieldErrors)
  .openapi("CreateForm");

/** The body of PATCH /forms/{id}: the fields to change. */
export const formChangeInput = z
  .object({
    name: name.optional(),
    lists: lists.optional(),
    topics: topics.optional(),
    double_opt_in: z.boolean().optional(),
    sender_id: senderId.optional(),
    redirect_url: redirectUrl.optional(),
    fields: fields.optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send at least one field" })
  .openapi("UpdateForm");

const signUpText = z.string().trim().max(CONTACT_TEXT_MAX_LENGTH).optional();

/**
 * What a public sign-up posts: `email` and contact fields. The caller passes only the fields the form accepts;
 * anything else posted (a submit button's name, fields the form does not take) is ignored, as web forms carry such things.
 */
export const signUpInput = z.object({
  email: contactEmail,
  first_name: signUpText,
  last_name: signUpText,
  company: signUpText,
  phone: signUpText,
  country: signUpText,
});
export type SignUpInput = z.infer<typeof signUpInput>;
export type FormInput = z.infer<typeof formInput>;
