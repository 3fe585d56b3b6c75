// The request bodies of the segments API, parsed by the API routes and the dashboard's segment forms alike.

import { z } from "../../lib/schema";
import { conditionProblems, SEGMENT_MAX_CONDITIONS, segmentFields, segmentOperators } from "./conditions";

const ConditionSchema = z
  .object({
    field: z
      .string()
      .max(100)
      .openapi({ description: `One of ${segmentFields.map((field) => `\`${field}\``).join(", ")}`, example: "custom_fields.plan" }),
    op: z
      .string()
      .max(20)
      .openapi({ enum: [...segmentOperators], example: "eq" }),
    value: z.unknown().optional().openapi({
      description:
        "A string, number or boolean; an array for `in`; a list id or array of list ids for `list`; days for `within_days`; an ISO 8601 date for `created_at`; none for `exists`/`not_exists`",
      example: "pro",
    }),
  })
  .strict()
  .openapi("SegmentCondition");

const ConditionsSchema = z
  .array(ConditionSchema)
  .min(1)
  .max(SEGMENT_MAX_CONDITIONS)
  .superRefine(
    (conditions, ctx) => {
      for (const [path, messages] of Object.entries(conditionProblems(conditions))) {
        for (const message of messages) ctx.addIssue({ code: "custom", message, path: path.split(".").slice(1) });
      }
    },
    // Runs even when some conditions failed their types, so the 422 lists every bad condition at once.
    { when: (payload) => Array.isArray(payload.value) && payload.value.length <= SEGMENT_MAX_CONDITIONS },
  );

const segmentFieldsSchema = {
  name: z.string().trim().min(1).max(200).openapi({ example: "Pro customers" }),
  match: z.enum(["all", "any"]).openapi({ description: "`all`: every condition holds; `any`: at least one does" }),
  conditions: ConditionsSchema,
};

/** The body of POST /segments. */
export const segmentInput = z.object(segmentFieldsSchema).strict().openapi("CreateSegment");
/** The body of PATCH /segments/{id}: the fields to change. */
export const segmentChangeInput = z
  .object({ name: segmentFieldsSchema.name.optional(), match: segmentFieldsSchema.match.optional(), conditions: ConditionsSchema.optional() })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: "Send name, match or conditions" })
  .openapi("UpdateSegment");
