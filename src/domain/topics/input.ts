// The request bodies of the topics API, parsed by the API routes and the dashboard's forms alike.

import { z } from "../../lib/schema";

const name = z.string().trim().min(1).max(100).openapi({ example: "Newsletter" });
const description = z.string().trim().max(500).nullable().openapi({ example: "Our monthly news, the first Monday of each month" });

/** The body of POST /topics. */
export const topicInput = z
  .object({
    name,
    description: description.optional(),
    default_subscribed: z.boolean().default(true).openapi({
      description: "Whether contacts who never chose are subscribed (opt-out topic, default) or not (opt-in: only contacts who chose it receive it)",
    }),
  })
  .strict()
  .openapi("CreateTopic");

/** The body of PATCH /topics/{id}: the fields to change. */
export const topicChangeInput = z
  .object({ name: name.optional(), description: description.optional(), default_subscribed: z.boolean().optional() })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send at least one field" })
  .openapi("UpdateTopic");
