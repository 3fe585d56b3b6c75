// The request body of POST /verify, parsed by the API route and the dashboard's check and upload forms alike.

import { evenWithFieldErrors, z } from "../../lib/schema";
import { MAX_JOB_ADDRESSES } from "./jobs";

// Long enough for any address a person could paste (the engine reports > 254 octets as bad syntax), short enough
// that a body of 50,000 of them stays inside the route's 5 MB limit.
const MAX_ADDRESS_INPUT = 1024;
const emailInput = z.string().trim().min(1, "Must not be empty").max(MAX_ADDRESS_INPUT);

/** The body of POST /verify: one address, or a bulk job. */
export const verifyInput = z
  .object({
    email: emailInput.optional().openapi({ description: "One address: verified synchronously", example: "jane@example.com" }),
    emails: z
      .array(emailInput)
      .min(1)
      .max(MAX_JOB_ADDRESSES)
      .optional()
      .openapi({ description: `1 to ${MAX_JOB_ADDRESSES.toLocaleString("en")} addresses: a bulk job (202), polled with GET /verify/{id}` }),
    emit_event: z
      .boolean()
      .optional()
      .openapi({ description: "Single checks only: also emit `verification.completed`. Bulk jobs always emit it when they finish." }),
  })
  .strict()
  .superRefine((body, ctx) => {
    if ((body.email === undefined) === (body.emails === undefined)) {
      ctx.addIssue({ code: "custom", path: ["email"], message: "Give either `email` (one address) or `emails` (a bulk job), not both" });
    }
  }, evenWithFieldErrors)
  .openapi("VerifyRequest");
