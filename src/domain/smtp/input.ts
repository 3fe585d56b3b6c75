// The request body of the SMTP credentials API, parsed by the API route and the dashboard's credential form alike.

import { z } from "../../lib/schema";

/** The body of POST /smtp-credentials. */
export const smtpCredentialInput = z
  .object({
    name: z.string().trim().min(1).max(100).openapi({ example: "Billing app" }),
    mode: z.enum(["live", "test"]).optional().openapi({
      description:
        "`test`: messages are accepted and simulated like those of a test key, never delivered or charged. Default: the mode of the key making the request; a test key can create only test credentials",
    }),
  })
  .strict()
  .openapi("CreateSmtpCredential");
