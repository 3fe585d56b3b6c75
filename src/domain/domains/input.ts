// The request bodies of the domains API, parsed by the API routes and the dashboard's domain and receiving forms alike.

import { z } from "../../lib/schema";
import { warmupPresets } from "../feedback/warmup";
import { MAX_RECEIVING_ADDRESSES } from "../inbound/receiving";

/** The body of POST /domains; `createDomain` checks the name is one a domain can have. */
export const domainInput = z
  .object({ name: z.string().max(253).openapi({ example: "example.com" }) })
  .strict()
  .openapi("CreateDomain");

/** The body of PATCH /domains/{id}: receiving on or off, and the addresses received. */
export const domainChangeInput = z
  .object({
    receiving: z.boolean().openapi({ description: "true: receive the domain's mail (it must be verified); false: refuse it at SMTP time" }),
    receiving_addresses: z
      .array(z.string().max(320))
      .max(MAX_RECEIVING_ADDRESSES)
      .nullable()
      .optional()
      .openapi({
        description: "Local parts (or whole addresses on the domain) to receive; null: every address; omitted: unchanged",
        example: ["support", "replies"],
      }),
  })
  .strict()
  .openapi("DomainChange");

/** The body of PUT /domains/{id}/warmup. */
export const warmupInput = z
  .object({
    enabled: z.boolean().openapi({ description: "true starts (or resumes) the warm-up; false pauses it" }),
    schedule: z
      .array(z.number().int().min(1).max(10_000_000))
      .min(1)
      .max(365)
      .optional()
      .openapi({ description: "Recipients per UTC day, day 0 first" }),
    preset: z
      .enum(Object.keys(warmupPresets) as [keyof typeof warmupPresets, ...(keyof typeof warmupPresets)[]])
      .optional()
      .openapi({ description: "A built-in schedule instead of `schedule` (standard: 50 a day to 100,000 over 15 days)" }),
    started_at: z.iso.date().optional().openapi({ description: "Day 0 (YYYY-MM-DD, UTC); default today, or the current start when resuming" }),
  })
  .strict()
  .refine((input) => !(input.schedule && input.preset), { message: "Give schedule or preset, not both", path: ["preset"] })
  .openapi("WarmupInput");
