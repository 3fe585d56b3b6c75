import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { documentPath, generate, schemaPath } from "../scripts/generate.ts";

describe("the SDK's generated types", () => {
  it("match the OpenAPI document the Worker serves now (else run `npm run sdk:generate`)", async () => {
    const { document, schema } = await generate();
    // Compared as text so a failure shows the changed paths; toBe keeps the diff readable for 300 KB files.
    expect(await readFile(documentPath, "utf8"), "sdk/openapi.json is stale: run `npm run sdk:generate`").toBe(document);
    expect(await readFile(schemaPath, "utf8"), "sdk/src/schema.ts is stale: run `npm run sdk:generate`").toBe(schema);
  }, 60_000);
});
