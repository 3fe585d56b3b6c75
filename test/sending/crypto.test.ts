import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { decryptSecret, encryptSecret, hmacSha256Hex, randomToken, SecretKeyError, sha256Hex } from "../../src/lib/crypto";

describe("encryptSecret / decryptSecret (DKIM keys at rest)", () => {
  it("round-trips with a fresh IV each time, in the v1.<iv>.<ciphertext> format", async () => {
    const secret = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC…ünïcode";
    const first = await encryptSecret(secret, env.DKIM_ENCRYPTION_KEY);
    const second = await encryptSecret(secret, env.DKIM_ENCRYPTION_KEY);
    expect(first).toMatch(/^v1\.[A-Za-z0-9+/]{16}\.[A-Za-z0-9+/=]+$/);
    expect(first).not.toBe(second);
    expect(first).not.toContain(secret);
    expect(await decryptSecret(first, env.DKIM_ENCRYPTION_KEY)).toBe(secret);
    expect(await decryptSecret(second, env.DKIM_ENCRYPTION_KEY)).toBe(secret);
  });

  it("refuses a tampered ciphertext or another key", async () => {
    const sealed = await encryptSecret("private key", env.DKIM_ENCRYPTION_KEY);
    const [version, iv, data] = sealed.split(".");
    const flipped = `${version}.${iv}.${data!.startsWith("A") ? "B" : "A"}${data!.slice(1)}`;
    await expect(decryptSecret(flipped, env.DKIM_ENCRYPTION_KEY)).rejects.toThrow(SecretKeyError);
    const otherKey = btoa(String.fromCharCode(...new Uint8Array(32).fill(7)));
    await expect(decryptSecret(sealed, otherKey)).rejects.toThrow(/could not be decrypted/);
    await expect(decryptSecret("v2.x.y", env.DKIM_ENCRYPTION_KEY)).rejects.toThrow(/unknown format/);
  });

  it("explains a key of the wrong length", async () => {
    await expect(encryptSecret("x", btoa("too short"))).rejects.toThrow(/exactly 32 bytes.*got 9 bytes/);
    await expect(encryptSecret("x", "***")).rejects.toThrow(/not valid base64/);
  });
});

describe("hashes and tokens", () => {
  it("computes SHA-256 and HMAC-SHA256 as hex (RFC 4231 test case 2)", async () => {
    expect(await sha256Hex("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    expect(await hmacSha256Hex("Jefe", "what do ya want for nothing?")).toBe("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  });

  it("makes unpadded base64url tokens of the requested entropy", () => {
    const tokens = Array.from({ length: 100 }, () => randomToken(24));
    expect(new Set(tokens).size).toBe(100);
    for (const token of tokens) expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(randomToken()).toHaveLength(43);
  });
});
