import { Scalar } from "@scalar/hono-api-reference";
import { adminAccountRoutes } from "./admin/accounts";
import { apiKeyRoutes } from "./api/api-keys";
import { meRoutes } from "./api/me";
import { errorBody, handleError } from "./errors";
import { createRouter } from "./lib/openapi";
import { adminAuth, apiKeyAuth } from "./middleware/auth";
import { requestBodyLimit, requestId } from "./middleware/request";

export const openApiInfo = {
  openapi: "3.1.0",
  info: {
    title: "Mailforge API",
    version: "1.0.0",
    description: "Send and verify email from your own Cloudflare account. Errors are `{message, code, errors?}`; every response has `X-Request-Id`.",
    license: { name: "MIT", identifier: "MIT" },
  },
  servers: [{ url: "/" }],
  tags: [
    { name: "Account", description: "The account behind the key" },
    { name: "API keys", description: "Create, rotate and revoke keys" },
    { name: "Operator", description: "Operator API under /admin/v1, authenticated with ADMIN_TOKEN" },
  ],
};

export function createApp() {
  const app = createRouter();
  app.use("*", requestId);
  app.use("*", requestBodyLimit);
  app.onError(handleError);
  app.notFound((c) => c.json(errorBody("not_found", `No route for ${c.req.method} ${c.req.path}`), 404));

  app.openAPIRegistry.registerComponent("securitySchemes", "apiKey", {
    type: "http",
    scheme: "bearer",
    description: "An API key: `Authorization: Bearer sk_live_…`",
  });
  app.openAPIRegistry.registerComponent("securitySchemes", "adminToken", {
    type: "http",
    scheme: "bearer",
    description: "The operator token (secret ADMIN_TOKEN)",
  });

  app.use("/api/v1/*", async (c, next) => {
    // The reference and its document are public; everything else under /api/v1 needs a key.
    if (c.req.path === "/api/v1/openapi.json" || c.req.path === "/api/v1/docs") return next();
    return apiKeyAuth(c, next);
  });
  app.use("/admin/v1/*", adminAuth);

  app.route("/api/v1", meRoutes);
  app.route("/api/v1", apiKeyRoutes);
  app.route("/admin/v1", adminAccountRoutes);

  app.doc31("/api/v1/openapi.json", openApiInfo);
  app.get("/api/v1/docs", Scalar({ url: "/api/v1/openapi.json", pageTitle: "Mailforge API reference" }));
  return app;
}
