import { describe, expect, it } from "vitest";
import { checkSyntax, dedupeKey } from "../../src/domain/verification";

const reasonOf = (input: string) => {
  const syntax = checkSyntax(input);
  return syntax.valid ? "valid" : syntax.reason;
};

describe("checkSyntax: accepted addresses", () => {
  it("trims the input, lower-cases the domain and keeps the local part's case", () => {
    expect(checkSyntax("  John.Doe+news@Example.COM \n")).toEqual({
      valid: true,
      email: "John.Doe+news@Example.COM",
      account: "John.Doe+news",
      domain: "example.com",
      normalized: "John.Doe+news@example.com",
      smtputf8: false,
    });
  });

  it.each([
    "simple@example.com",
    "very.common@example.com",
    "x@example.com",
    "other.email-with-hyphen@example.com",
    "user.name+tag+sorting@example.com",
    "!#$%&'*+-/=?^_`{|}~@example.org",
    "user@sub-domain.example.co.uk",
    "user@123.example.com",
    "user@xn--bcher-kva.example",
  ])("accepts dot-atom %s", (address) => {
    expect(reasonOf(address)).toBe("valid");
  });

  it("converts an IDN domain to punycode", () => {
    const syntax = checkSyntax("anna@Bücher.example");
    expect(syntax).toMatchObject({ valid: true, domain: "xn--bcher-kva.example", normalized: "anna@xn--bcher-kva.example" });
  });

  it("accepts a UTF-8 local part and flags it as needing SMTPUTF8 (RFC 6531)", () => {
    expect(checkSyntax("josé@example.com")).toMatchObject({ valid: true, smtputf8: true, account: "josé" });
    expect(checkSyntax("用户@例子.测试")).toMatchObject({ valid: true, smtputf8: true, domain: "xn--fsqu00a.xn--0zwm56d" });
  });

  it("normalizes a decomposed UTF-8 local part to NFC", () => {
    const decomposed = "jose\u0301@example.com";
    expect(checkSyntax(decomposed)).toMatchObject({ valid: true, normalized: "jos\u00e9@example.com" });
  });
});

describe("checkSyntax: rejected addresses and why", () => {
  it.each([
    ["", "empty"],
    ["   ", "empty"],
    ["plainaddress", "missing_at"],
    ["@example.com", "empty_local_part"],
    ["user@", "empty_domain"],
    ['"john doe"@example.com', "quoted_local_part"],
    ['"a@b"@example.com', "quoted_local_part"],
    [".user@example.com", "invalid_local_part"],
    ["user.@example.com", "invalid_local_part"],
    ["us..er@example.com", "invalid_local_part"],
    ["john doe@example.com", "invalid_local_part"],
    ["a(b)@example.com", "invalid_local_part"],
    ["a@b@example.com", "invalid_local_part"],
    ["zero\u200bwidth@example.com", "invalid_local_part"],
    ["user@[192.0.2.1]", "ip_literal"],
    ["user@[IPv6:2001:db8::1]", "ip_literal"],
    ["user@192.0.2.1", "numeric_tld"],
    ["user@example.123", "numeric_tld"],
    ["user@localhost", "single_label_domain"],
    ["user@-example.com", "invalid_domain_label"],
    ["user@example-.com", "invalid_domain_label"],
    ["user@exa_mple.com", "invalid_domain_label"],
    ["user@example..com", "invalid_domain_label"],
    ["user@example.com.", "invalid_domain_label"],
    ["user@.example.com", "invalid_domain_label"],
    ["user@exam ple.com", "invalid_domain_label"],
    ["user@example.com/path", "invalid_domain_label"],
    ["user@bü/cher.example", "invalid_domain_label"],
    [`user@${"a".repeat(64)}.com`, "label_too_long"],
  ])("%j → %s", (address, reason) => {
    expect(reasonOf(address)).toBe(reason);
  });

  it("splits a rejected address on its last @ for account and domain", () => {
    expect(checkSyntax(" Admin@[192.0.2.1] ")).toEqual({
      valid: false,
      email: "Admin@[192.0.2.1]",
      account: "Admin",
      domain: "[192.0.2.1]",
      reason: "ip_literal",
    });
  });
});

describe("checkSyntax: length limits (RFC 5321 §4.5.3.1)", () => {
  it("allows a 64-octet local part and refuses 65", () => {
    expect(reasonOf(`${"a".repeat(64)}@example.com`)).toBe("valid");
    expect(reasonOf(`${"a".repeat(65)}@example.com`)).toBe("local_part_too_long");
  });

  it("counts a UTF-8 local part in octets, not characters", () => {
    // 32 × "é" is 32 characters but 64 octets; one more character is over.
    expect(reasonOf(`${"é".repeat(32)}@example.com`)).toBe("valid");
    expect(reasonOf(`${"é".repeat(32)}a@example.com`)).toBe("local_part_too_long");
  });

  it("allows a 254-octet address and refuses 255", () => {
    // Two 63-octet labels, one filler label and ".com": 63 + 1 + 63 + 1 + filler + 4.
    const domainOf = (length: number) => `${"d".repeat(63)}.${"d".repeat(63)}.${"d".repeat(length - 132)}.com`;
    const local = "l".repeat(64);
    const fits = `${local}@${domainOf(254 - 65)}`;
    const over = `${local}@${domainOf(255 - 65)}`;
    expect(fits).toHaveLength(254);
    expect(over).toHaveLength(255);
    expect(reasonOf(fits)).toBe("valid");
    expect(reasonOf(over)).toBe("address_too_long");
  });

  it("refuses a domain over 255 octets", () => {
    const domain = `${Array.from({ length: 5 }, () => "d".repeat(63)).join(".")}.com`;
    expect(reasonOf(`a@${domain}`)).toBe("domain_too_long");
  });
});

describe("dedupeKey", () => {
  it("treats case, surrounding space and IDN spelling of the same address as one", () => {
    const key = dedupeKey("anna@xn--bcher-kva.example");
    expect(dedupeKey("  ANNA@Bücher.Example ")).toBe(key);
    expect(dedupeKey("Anna@XN--BCHER-KVA.example")).toBe(key);
  });

  it("keeps dots and +tags apart: they are different mailboxes at most providers", () => {
    expect(dedupeKey("j.doe@example.com")).not.toBe(dedupeKey("jdoe@example.com"));
    expect(dedupeKey("jdoe+a@example.com")).not.toBe(dedupeKey("jdoe@example.com"));
  });

  it("keys an invalid address by its trimmed, lower-cased text", () => {
    expect(dedupeKey(" Not An Email ")).toBe("not an email");
  });
});
