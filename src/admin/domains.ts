import { clearReputationHold } from "../domain/feedback/reputation";
import { notFound } from "../errors";
import { adminRoute, createRouter, errorResponse, IdParam, jsonResponse, z } from "../lib/openapi";

const clearHold = adminRoute({
  method: "post",
  path: "/domains/{id}/reputation/clear",
  summary: "Clear a domain's reputation hold",
  description:
    "A domain whose daily bounce rate passed 5% or complaint rate 0.3% is held: its campaign sends are refused. Clear it once the cause is fixed " +
    "(a bad list removed, a compromised key revoked). A paused warm-up stays paused: the account resumes it with PUT /domains/{id}/warmup.",
  request: { params: IdParam("dom") },
  responses: {
    200: jsonResponse(z.object({ id: z.string(), reputation: z.literal("ok") }), "Cleared"),
    404: errorResponse("No such domain, or it is not held"),
  },
});

export const adminDomainRoutes = createRouter().openapi(clearHold, async (c) => {
  const { id } = c.req.valid("param");
  if (!(await clearReputationHold(c.var.ctx.shared, id))) throw notFound("Held domain");
  return c.json({ id, reputation: "ok" as const }, 200);
});
