import { describe, expect, it } from "vitest";
import { timingSafeEqualString } from "../../src/lib/crypto";
import { generateApiKey, looksLikeApiKey } from "../../src/domain/accounts/api-keys";

describe("secret comparison", () => {
  it("is exact for equal, different and different-length secrets", async () => {
    expect(await timingSafeEqualString("s3cret-token", "s3cret-token")).toBe(true);
    expect(await timingSafeEqualString("s3cret-token", "s3cret-tokeN")).toBe(false);
    expect(await timingSafeEqualString("s3cret-token", "s3cret-token-longer")).toBe(false);
    expect(await timingSafeEqualString("", "x")).toBe(false);
    expect(await timingSafeEqualString("ünïcödé", "ünïcödé")).toBe(true);
  });

  it("compares fixed-size digests, so the time taken does not depend on where the inputs differ", async () => {
    // Both inputs are hashed to 32 bytes before crypto.subtle.timingSafeEqual; the runtime throws on unequal
    // lengths, so a comparison of differently sized secrets only works if that hashing happens.
    expect(await timingSafeEqualString("a", "a".repeat(10_000))).toBe(false);
  });
});

describe("API key format", () => {
  it("generates distinct sk_live_/sk_test_ keys with a 12-character display prefix", async () => {
    const keys = await Promise.all(Array.from({ length: 50 }, () => generateApiKey("live")));
    expect(new Set(keys.map((key) => key.key)).size).toBe(50);
    for (const key of keys) {
      expect(looksLikeApiKey(key.key)).toBe(true);
      expect(key.prefix).toBe(key.key.slice(0, 12));
      expect(key.keyHash).toMatch(/^[0-9a-f]{64}$/);
    }
    expect((await generateApiKey("test")).key).toMatch(/^sk_test_/);
    expect(looksLikeApiKey("sk_live_short")).toBe(false);
  });
});
