import { describe, expect, it } from "vitest";
import { isDisposableDomain, isFreeProviderDomain, isRoleBasedLocalPart, suggestDomain } from "../../src/domain/verification";
import { editDistance } from "../../src/domain/verification/typo";

describe("suggestDomain", () => {
  it.each([
    ["gmial.com", "gmail.com"],
    ["gmal.com", "gmail.com"],
    ["gmaill.com", "gmail.com"],
    ["hotmial.com", "hotmail.com"],
    ["hotmal.con", "hotmail.com"],
    ["yaho.com", "yahoo.com"],
    ["yahooo.com", "yahoo.com"],
    ["outlok.com", "outlook.com"],
    ["iclod.com", "icloud.com"],
    ["gmail.co", "gmail.com"],
    ["yahoo.cm", "yahoo.com"],
    ["gmail.con", "gmail.com"],
    ["acme.con", "acme.com"],
    ["acme.cmo", "acme.com"],
    ["example.nte", "example.net"],
    ["hotmial.co.uk", "hotmail.co.uk"],
  ])("%s → %s", (domain, suggestion) => {
    expect(suggestDomain(domain, isFreeProviderDomain)).toBe(suggestion);
  });

  it.each([
    "gmail.com",
    "yahoo.com",
    "mail.com",
    "email.com",
    "ymail.com",
    "aon.com",
    "love.com",
    "wahoo.com",
    "hotmail.co",
    "outlook.cl",
    "acme.co",
    "example.org",
    "xn--bcher-kva.example",
  ])("leaves %s alone", (domain) => {
    expect(suggestDomain(domain, isFreeProviderDomain)).toBeNull();
  });
});

describe("editDistance (optimal string alignment)", () => {
  it("counts a transposition as one edit", () => {
    expect(editDistance("gmial", "gmail")).toBe(1);
    expect(editDistance("kitten", "sitting")).toBe(3);
    expect(editDistance("", "abc")).toBe(3);
  });

  it("stops early past the limit", () => {
    expect(editDistance("abcdef", "uvwxyz", 2)).toBe(3);
    expect(editDistance("a", "abcdef", 1)).toBe(2);
  });
});

describe("lists from the data packages", () => {
  it("knows disposable domains, subdomains included", () => {
    expect(isDisposableDomain("mailinator.com")).toBe(true);
    expect(isDisposableDomain("inbox.mailinator.com")).toBe(true);
    expect(isDisposableDomain("gmail.com")).toBe(false);
  });

  it("knows free providers and never calls a disposable domain one", () => {
    expect(isFreeProviderDomain("gmail.com")).toBe(true);
    expect(isFreeProviderDomain("GMX.de")).toBe(true);
    expect(isFreeProviderDomain("mailinator.com")).toBe(false);
    expect(isFreeProviderDomain("acme.verify-test")).toBe(false);
  });

  it("knows role accounts, also behind a +tag", () => {
    expect(isRoleBasedLocalPart("admin")).toBe(true);
    expect(isRoleBasedLocalPart("Info")).toBe(true);
    expect(isRoleBasedLocalPart("no-reply")).toBe(true);
    expect(isRoleBasedLocalPart("admin+billing")).toBe(true);
    expect(isRoleBasedLocalPart("jane.doe")).toBe(false);
  });
});
