// The request bodies of the automations API, parsed by the API routes, the private trigger URL and the dashboard's
// automation builder alike.

import { z } from "../../lib/schema";
import { contactEmail, customFields } from "../contacts/input";
import { stepsSchema } from "./steps";

const StepsSchema = stepsSchema.openapi({
  description:
    "Run in order: `send_email {sender_id, template_id | subject + html/text}`, `wait {seconds | until}` (up to 365 days), `add_to_list {list_id}`, `remove_from_list {list_id}`, `update_contact {fields, custom_fields}`, `condition {match, conditions}` (segment conditions on the contact; the run stops when false), `webhook {url}` (signed with the automation's `webhook_secret`)",
  example: [
    { type: "send_email", sender_id: "snd_4fK9pQ2mZ7xB1vL8tR3cWd", subject: "Welcome {{first_name|there}}", html: "<p>Hi!</p>" },
    { type: "wait", seconds: 86400 },
    { type: "add_to_list", list_id: "lst_2bN7vQ1mK8xZ3cR5tL0pWd" },
  ],
});

const RedirectUrlSchema = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .nullable()
  .openapi({ description: "Where the private URL sends a browser form after a trigger (303)" });

/** The body of POST /automations. */
export const automationInput = z
  .object({
    name: z.string().trim().min(1).max(200),
    status: z.enum(["active", "paused"]).default("active"),
    steps: StepsSchema,
    redirect_url: RedirectUrlSchema.optional(),
  })
  .strict()
  .openapi("CreateAutomation");

/** The body of PATCH /automations/{id}: the fields to change. */
export const automationChangeInput = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    status: z.enum(["active", "paused"]).optional(),
    steps: StepsSchema.optional(),
    redirect_url: RedirectUrlSchema.optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send at least one field to change" })
  .openapi("UpdateAutomation");

/** The fields a trigger takes, from the API or the private URL: the contact as POST /contacts takes it, plus an event id. */
export const automationTriggerInput = z
  .object({
    email: contactEmail,
    first_name: z.string().trim().max(256).nullable().optional(),
    last_name: z.string().trim().max(256).nullable().optional(),
    company: z.string().trim().max(256).nullable().optional(),
    phone: z.string().trim().max(256).nullable().optional(),
    country: z.string().trim().max(256).nullable().optional(),
    custom_fields: customFields.optional(),
    event_id: z
      .string()
      .min(1)
      .max(200)
      .optional()
      .openapi({ description: "Idempotency: the same event_id for the same automation returns the same run and starts nothing new" }),
  })
  .strict()
  .openapi("AutomationTrigger");
