// The request body of the suppressions API.

import { z } from "../../lib/schema";
import { contactEmail } from "../contacts/input";
import { suppressionReasons, suppressionScopes } from "./suppressions";

/** The body of POST /suppressions. */
export const suppressionInput = z
  .object({
    email: contactEmail,
    reason: z.enum(suppressionReasons).default("manual"),
    scope: z
      .enum(suppressionScopes)
      .optional()
      .openapi({
        description:
          "Which mail it keeps away: `all` (every stream), `broadcast` (campaigns, newsletters) or `transactional`. " +
          "Default: `broadcast` for `unsubscribe`, `all` otherwise (a `complaint` entered by hand too)",
      }),
  })
  .strict()
  .openapi("CreateSuppression");
