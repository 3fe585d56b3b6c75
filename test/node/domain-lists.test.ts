import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { dataDir, domainLists } from "../../scripts/lib/domain-lists.ts";
import disposableText from "../../src/domain/verification/data/disposable-domains.ts";
import freeText from "../../src/domain/verification/data/free-domains.ts";

describe("verification domain lists", () => {
  it("ship what the installed npm packages hold (run `npm run lists` after updating them)", () => {
    for (const [name, source] of Object.entries(domainLists())) {
      expect(readFileSync(join(dataDir, name), "utf8"), name).toBe(source);
    }
  });

  it("keep every free-provider domain off the disposable list, and the best-known ones on the right list", () => {
    const disposable = new Set(disposableText.split("\n"));
    const free = freeText.split("\n").filter(Boolean);
    expect(free.filter((domain) => disposable.has(domain))).toEqual([]);
    expect(free).toContain("gmail.com");
    expect(disposable.has("mailinator.com")).toBe(true);
  });
});
