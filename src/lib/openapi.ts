import { invalidCursorMessage, isCursor } from "./pagination";
import { createRoute, OpenAPIHono, type RouteConfig } from "@hono/zod-openapi";
import { fieldErrors, validationError } from "../errors";
import { evenWithFieldErrors, z } from "./schema";
import { auditedAction } from "../domain/audit/audit";
import { auditOperator, auditWrites } from "../middleware/audit";
import { requireFeatures, requireFullAccess, requireLiveKey, requireScope } from "../middleware/auth";
import type { AppEnv } from "../types";
import type { Feature, Scope } from "../access";

export { evenWithFieldErrors, z };

/** Every router validates with the same hook, so a bad body, query or path is always a 422 keyed by field path. */
export function createRouter() {
  return new OpenAPIHono<AppEnv>({
    defaultHook: (result) => {
      if (!result.success) {
        const prefix = result.target === "json" ? undefined : result.target;
        throw validationError(fieldErrors(result.error, prefix));
      }
    },
  });
}

export const ErrorSchema = z
  .object({
    message: z.string().openapi({ example: "The request is invalid" }),
    code: z.string().openapi({ example: "validation_failed" }),
    errors: z
      .record(z.string(), z.array(z.string()))
      .optional()
      .openapi({ example: { "to.0": ["Invalid email address"] } }),
  })
  .openapi("Error");

const errorContent = { "application/json": { schema: ErrorSchema } };
export const errorResponse = (description: string) => ({ description, content: errorContent });

export const commonErrors = {
  401: errorResponse("Missing or invalid API key"),
  403: errorResponse("The key lacks the scope, or the account the plan or feature"),
  422: errorResponse("Validation failed; `errors` is keyed by field path"),
  429: errorResponse("Rate limit reached; see Retry-After"),
} as const;

// Any write of an account may meet a move of its data (docs/operations.md, "Moving an account"); a route whose own
// 503 means something else lists that instead.
const writeErrors = {
  503: errorResponse("`account_moving`: the operator is moving the account's data; nothing was done, retry after Retry-After"),
} as const;

export type RouteAccess = Scope | "any" | "full_access";

/**
 * A route of the keyed API. Its scope is declared once here: it becomes the middleware that enforces it and
 * the `x-required-scope` the OpenAPI document shows. A write route is recorded in the audit log (auditedAction).
 */
export function keyedRoute<R extends Omit<RouteConfig, "middleware" | "security">>(
  access: RouteAccess,
  route: R,
  options: { features?: Feature[] /** What the route does, for the 403 a test key gets (`Changing a webhook`). */; liveKeyOnly?: string } = {},
) {
  const audit = auditedAction(route.method.toUpperCase(), `/api/v1${route.path}`);
  const middleware = [
    ...(audit ? [auditWrites(audit)] : []),
    ...(access === "any" ? [] : [access === "full_access" ? requireFullAccess : requireScope(access)]),
    ...(options.features?.length ? [requireFeatures(...options.features)] : []),
    ...(options.liveKeyOnly ? [requireLiveKey(options.liveKeyOnly)] : []),
  ];
  const scopeNote = access === "any" ? "Any API key." : access === "full_access" ? "Needs a full-access key." : `Scope: \`${access}\`.`;
  const liveNote = options.liveKeyOnly ? "Needs a live key (`live_key_required` for a test key)." : undefined;
  return createRoute({
    ...route,
    description: [route.description, scopeNote, liveNote].filter(Boolean).join("\n\n"),
    middleware,
    security: [{ apiKey: [] }],
    "x-required-scope": access,
    responses: { ...commonErrors, ...(route.method === "get" ? {} : writeErrors), ...route.responses },
  });
}

/** A route of the operator API; one that changes an account is recorded in its audit log, the operator as actor. */
export function adminRoute<R extends Omit<RouteConfig, "security" | "middleware">>(route: R) {
  const audit = auditedAction(route.method.toUpperCase(), `/admin/v1${route.path}`);
  return createRoute({
    ...route,
    middleware: audit ? [auditOperator(audit)] : [],
    tags: ["Operator"],
    security: [{ adminToken: [] }],
    responses: { 401: errorResponse("Missing or invalid operator token"), 422: commonErrors[422], ...route.responses },
  });
}

export const jsonBody = <T extends z.ZodType>(schema: T, description?: string) => ({
  required: true,
  description,
  content: { "application/json": { schema } },
});

export const jsonResponse = <T extends z.ZodType>(schema: T, description: string) => ({
  description,
  content: { "application/json": { schema } },
});

export const IdParam = (prefix: string) =>
  z.object({
    id: z
      .string()
      .min(1)
      .max(64)
      .openapi({ param: { name: "id", in: "path" }, example: `${prefix}_8fJ2kQ0aZ1` }),
  });

export const Timestamp = z.string().openapi({ format: "date-time", example: "2026-11-22T10:15:00.000Z" });

export const PaginationQuery = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(100)
    .default(20)
    .openapi({ param: { name: "limit", in: "query" } }),
  cursor: z
    .string()
    .max(200)
    .refine(isCursor, invalidCursorMessage)
    .optional()
    .openapi({ param: { name: "cursor", in: "query" } }),
});

export const paginated = <T extends z.ZodType>(item: T, name: string) =>
  z.object({ data: z.array(item), has_more: z.boolean(), next_cursor: z.string().nullable() }).openapi(name);
