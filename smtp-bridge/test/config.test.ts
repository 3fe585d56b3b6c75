import { X509Certificate, createPrivateKey } from "node:crypto";
import { tmpdir } from "node:os";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../src/config.ts";
import { generateSelfSignedCertificate, loadTlsCredentials } from "../src/tls.ts";

const required = { WORKER_URL: "http://127.0.0.1:8787", BRIDGE_SECRET: "0123456789abcdef0123" };

describe("configuration from the environment", () => {
  it("defaults to the standard ports on loopback, 5 s auth cache, no insecure auth", () => {
    expect(loadConfig(required)).toMatchObject({
      host: "127.0.0.1",
      smtpPort: 587,
      altPort: 2525,
      smtpsPort: 465,
      tls: undefined,
      authCacheTtlMs: 5000,
      allowInsecureAuthOnLoopback: false,
      workerUrl: "http://127.0.0.1:8787",
    });
  });

  it("names every bad variable in one error", () => {
    const error = (() => {
      try {
        loadConfig({ WORKER_URL: "not a url", BRIDGE_SECRET: "short", SMTP_PORT: "70000", AUTH_CACHE_TTL_MS: "60000" });
      } catch (caught) {
        return caught as Error;
      }
      throw new Error("expected a ConfigError");
    })();
    expect(error).toBeInstanceOf(ConfigError);
    for (const name of ["WORKER_URL", "BRIDGE_SECRET", "SMTP_PORT", "AUTH_CACHE_TTL_MS"]) expect(error.message).toContain(name);
  });

  it("caps the bytes in flight at 512 MiB by default, never below MAX_MESSAGE_BYTES, spooled in the temp directory", () => {
    expect(loadConfig(required)).toMatchObject({ maxBytesInFlight: 512 * 1024 * 1024, maxMessageBytes: 25 * 1024 * 1024, spoolDir: tmpdir() });
    expect(loadConfig({ ...required, MAX_BYTES_IN_FLIGHT: "1000000", MAX_MESSAGE_BYTES: "1000000" }).maxBytesInFlight).toBe(1_000_000);
    expect(() => loadConfig({ ...required, MAX_BYTES_IN_FLIGHT: "1000000" })).toThrow(
      /must be at least MAX_MESSAGE_BYTES[\s\S]*at MAX_BYTES_IN_FLIGHT/,
    );
    expect(() => loadConfig({ ...required, MAX_BYTES_IN_FLIGHT: "lots" })).toThrow(/MAX_BYTES_IN_FLIGHT/);
  });

  it("needs certificate files in production, and both of them together", () => {
    expect(() => loadConfig({ ...required, NODE_ENV: "production" })).toThrow(/required in production[\s\S]*at TLS_CERT/);
    expect(() => loadConfig({ ...required, TLS_CERT: "/etc/cert.pem" })).toThrow(/TLS_KEY/);
    expect(() => loadConfig({ ...required, NODE_ENV: "production", TLS_CERT: "/c", TLS_KEY: "/k", ALLOW_INSECURE_AUTH_ON_LOOPBACK: "true" })).toThrow(
      /ALLOW_INSECURE_AUTH_ON_LOOPBACK/,
    );
    // an empty variable counts as unset
    expect(loadConfig({ ...required, TLS_CERT: "", TLS_KEY: "" }).tls).toBeUndefined();
  });
});

describe("TLS material", () => {
  it("generates a valid self-signed certificate for the bridge's names without openssl", () => {
    const { key, cert } = generateSelfSignedCertificate(["mx.example.test", "localhost", "127.0.0.1", "::1"]);
    const certificate = new X509Certificate(cert);
    expect(certificate.subject).toBe("CN=mx.example.test");
    expect(certificate.subjectAltName).toBe("DNS:mx.example.test, DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1");
    expect(certificate.verify(certificate.publicKey)).toBe(true);
    expect(certificate.checkPrivateKey(createPrivateKey(key))).toBe(true);
    expect(Date.parse(certificate.validTo) - Date.now()).toBeGreaterThan(300 * 24 * 3600_000);
  });

  it("is generated only when no files are configured", () => {
    const config = loadConfig({ ...required, SMTP_HOSTNAME: "relay.test" });
    expect(loadTlsCredentials(config).selfSigned).toBe(true);
  });
});
