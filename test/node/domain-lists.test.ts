import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { dataDir, domainLists } from "../../scripts/lib/domain-lists.ts";

describe("verification domain lists", () => {
  it("ship what the installed npm packages hold (run `npm run lists` after updating them)", () => {
    for (const [name, text] of Object.entries(domainLists())) {
      expect(readFileSync(join(dataDir, name), "utf8"), name).toBe(text);
    }
  });

  it("keep every free-provider domain off the disposable list, and the best-known ones on the right list", () => {
    const lists = domainLists();
    const disposable = new Set(lists["disposable-domains.txt"]!.split("\n"));
    const free = lists["free-domains.txt"]!.split("\n").filter(Boolean);
    expect(free.filter((domain) => disposable.has(domain))).toEqual([]);
    expect(free).toContain("gmail.com");
    expect(disposable.has("mailinator.com")).toBe(true);
  });
});
