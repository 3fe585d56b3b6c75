// The zod every request schema is written with: @hono/zod-openapi's, so a schema's `.openapi()` names and
// descriptions travel with it from its domain's input.ts to the OpenAPI document, and the dashboard parses its forms
// with the very schema the API documents.

import { z } from "@hono/zod-openapi";

export { z };

/**
 * For an object's cross-field `superRefine`: zod skips it once a field has the wrong type, and a 422 then lacks
 * those rules' errors. Pass this to run it whenever the body is an object; the check must then read its fields as
 * untrusted values.
 */
export const evenWithFieldErrors = {
  when: (payload: { value: unknown }) => typeof payload.value === "object" && payload.value !== null && !Array.isArray(payload.value),
};
