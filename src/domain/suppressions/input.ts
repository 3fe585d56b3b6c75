// The request body of the suppressions API.

import { z } from "../../lib/schema";
import { contactEmail } from "../contacts/input";
import { suppressionReasons } from "./suppressions";

/** The body of POST /suppressions. */
export const suppressionInput = z
  .object({
    email: contactEmail,
    reason: z.enum(suppressionReasons).default("manual"),
  })
  .strict()
  .openapi("CreateSuppression");
