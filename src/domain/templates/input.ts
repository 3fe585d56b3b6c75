// The request bodies of the templates API, parsed by the API routes and the dashboard's template forms alike.

import { evenWithFieldErrors, z } from "../../lib/schema";

const noLineBreaks = (value: string) => !/[\r\n]/.test(value);
const templateFields = {
  name: z.string().trim().min(1).max(200),
  subject: z.string().min(1).max(998).refine(noLineBreaks, "The subject must not contain line breaks"),
  html: z.string().max(1_000_000).nullable().optional(),
  text: z.string().max(1_000_000).nullable().optional(),
};

/** The body of POST /templates. */
export const templateInput = z
  .object(templateFields)
  .strict()
  .refine((body) => Boolean(body.html ?? body.text), { message: "Give html, text or both", path: ["html"], ...evenWithFieldErrors })
  .openapi("CreateTemplate");
/** The body of PATCH /templates/{id}: the fields to change. */
export const templateChangeInput = z
  .object({
    name: templateFields.name.optional(),
    subject: templateFields.subject.optional(),
    html: templateFields.html,
    text: templateFields.text,
  })
  .strict()
  .openapi("UpdateTemplate");
