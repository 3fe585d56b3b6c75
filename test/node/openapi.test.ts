import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import SwaggerParser from "@apidevtools/swagger-parser";
import { validate as scalarValidate } from "@scalar/openapi-parser";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

type OpenApiDocument = { openapi: string; paths: Record<string, Record<string, { security?: unknown[]; "x-required-scope"?: string }>> };
type AppModule = { createApp(): { routes: { method: string; path: string }[]; request(path: string): Promise<Response> } };

// The Worker's source is typed against the Workers runtime, not Node; load it untyped here so this Node suite can
// check the document the Worker serves with real OpenAPI tools (Redocly's linter, Scalar's parser, swagger-parser),
// which do not run inside workerd.
const appModulePath = "../../src/app.ts";

let dir: string;
let documentPath: string;
let app: ReturnType<AppModule["createApp"]>;
let document: OpenApiDocument;

beforeAll(async () => {
  app = ((await import(appModulePath)) as AppModule).createApp();
  // As GET /api/v1/openapi.json serves it.
  document = (await (await app.request("/api/v1/openapi.json")).json()) as OpenApiDocument;
  dir = await mkdtemp(join(tmpdir(), "openapi-"));
  documentPath = join(dir, "openapi.json");
  await writeFile(documentPath, JSON.stringify(document, null, 2));
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the OpenAPI document", () => {
  it("is OpenAPI 3.1 and passes `redocly lint` with the recommended rules", async () => {
    expect(document.openapi).toBe("3.1.0");
    const redocly = join(process.cwd(), "node_modules/.bin/redocly");
    const result = await promisify(execFile)(redocly, ["lint", documentPath, "--format", "json"], { maxBuffer: 16 * 1024 * 1024 }).catch(
      (error: { stdout: string; stderr: string; code: number }) => error,
    );
    const report = JSON.parse(result.stdout) as { totals: { errors: number; warnings: number }; problems: { message: string; location: unknown }[] };
    expect(report.problems.filter((problem) => JSON.stringify(problem).includes('"severity":"error"'))).toEqual([]);
    expect(report.totals.errors).toBe(0);
  }, 60_000);

  // Two validators of their own, beside the linter: Scalar's parser (the one the API reference at /api/v1/docs runs, and
  // whose errors its page logs) and swagger-parser (what many generators and gateways check a document with).
  it("passes Scalar's parser with no errors", async () => {
    const result = await scalarValidate(structuredClone(document));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
  });

  it("passes swagger-parser's validation with no errors", async () => {
    // The served document as written to disk in beforeAll: swagger-parser reads it from there.
    const problem = await SwaggerParser.validate(documentPath).then(
      () => undefined,
      (error: Error & { details?: unknown }) => ({ message: error.message, details: error.details }),
    );
    expect(problem).toBeUndefined();
  });

  it("lists every implemented API route with its scope", () => {
    const documented = new Set(
      Object.entries(document.paths).flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`)),
    );
    const implemented = app.routes
      .filter((route) => route.method !== "ALL" && /^\/(api|admin)\//.test(route.path))
      .filter((route) => !["/api/v1/openapi.json", "/api/v1/docs"].includes(route.path))
      .map((route) => `${route.method} ${route.path.replace(/:(\w+)/g, "{$1}")}`);
    expect(implemented.length).toBeGreaterThan(5);
    expect(implemented.filter((route) => !documented.has(route))).toEqual([]);

    for (const [path, operations] of Object.entries(document.paths)) {
      if (!path.startsWith("/api/v1/")) continue;
      for (const [method, operation] of Object.entries(operations)) {
        expect(operation["x-required-scope"], `${method} ${path}`).toBeDefined();
        expect(operation.security, `${method} ${path}`).toEqual([{ apiKey: [] }]);
      }
    }
  });
});
