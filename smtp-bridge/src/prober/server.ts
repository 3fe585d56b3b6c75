import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import {
  BRIDGE_SIGNATURE_HEADER,
  BRIDGE_SIGNATURE_REFUSED,
  freshSignatureHeader,
  PROBE_MAX_BODY_BYTES,
  PROBE_PATH,
  ProbeRequest,
  verifyBridgeSignature,
} from "@mailforge/bridge-contract";
import { z } from "zod";
import type { Logger } from "../log.ts";
import type { ProberConfig } from "./config.ts";
import { createDohResolver, type Resolver } from "./dns.ts";
import { CatchAllCache, HostGate, runProbe } from "./probe.ts";

// The prober's HTTP side: one signed route, POST /v1/probe. The signature's freshness is checked from the header
// before the body is read and the length is capped, so an unsigned, stale or oversized request costs nothing; the
// body is then checked against its signature, then against the contract's schema. Errors use the API's shape.
//
// The signature covers the body, so a request with a current timestamp and a forged signature is read before it can
// be refused. What that costs is bounded: at most `maxUnverifiedRequests` bodies are read at once (more are refused
// with 503 and Retry-After, unread), and each must arrive within `requestTimeoutMs`: Node's requestTimeout answers
// 408 and closes the connection, and its headersTimeout closes one that sends nothing. Neither runs once the request
// is whole, so a probe may take its minutes.

export interface ProberServer {
  listen(): Promise<number>;
  close(): Promise<void>;
}

// Node checks requests against requestTimeout this often; its default (30 s) would let a stalled body live far longer
// than the timeout says.
const TIMEOUT_CHECK_INTERVAL_MS = 1_000;

class BodyTooLarge extends Error {}
/** The connection ended (the client left, or the request timeout closed it) before the body did. */
class BodyIncomplete extends Error {}

function readBody(request: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    request.on("data", (part: Buffer) => {
      size += part.length;
      if (size > limit) {
        reject(new BodyTooLarge());
        request.destroy();
        return;
      }
      parts.push(part);
    });
    request.once("end", () => resolve(Buffer.concat(parts)));
    // after "end" the promise is settled and these do nothing
    request.once("error", () => reject(new BodyIncomplete()));
    request.once("close", () => reject(new BodyIncomplete()));
  });
}

function send(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { ...headers, "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  response.end(text);
}

const refusal = (message: string, code: string, errors?: Record<string, string[]>) => ({ message, code, ...(errors ? { errors } : {}) });

export function createProberServer(config: ProberConfig, deps: { logger: Logger; resolver?: Resolver }): ProberServer {
  const probeDeps = {
    config,
    resolver: deps.resolver ?? createDohResolver(config.dohUrl, config.maxMxHosts),
    gate: new HostGate(config),
    catchAll: new CatchAllCache(),
  };
  const server: Server = createHttpServer(
    {
      requestTimeout: config.requestTimeoutMs,
      headersTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: TIMEOUT_CHECK_INTERVAL_MS,
    },
    (request, response) => {
      void handle(request, response).catch((error: Error) => {
        deps.logger.log("error", "prober.request_failed", { error: error.message });
        if (!response.headersSent) send(response, 500, refusal("The probe failed", "internal_error"));
      });
    },
  );
  let unverified = 0;

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = new URL(request.url ?? "/", "http://prober").pathname;
    if (path !== PROBE_PATH) return send(response, 404, refusal("Not found", "not_found"));
    if (request.method !== "POST") return send(response, 405, refusal("Use POST", "method_not_allowed"));
    const header = request.headers[BRIDGE_SIGNATURE_HEADER.toLowerCase()];
    const signature = Array.isArray(header) ? header[0] : header;
    if (!freshSignatureHeader(signature)) {
      return send(response, 401, refusal("Missing, malformed or stale signature", BRIDGE_SIGNATURE_REFUSED));
    }
    if (Number(request.headers["content-length"] ?? 0) > PROBE_MAX_BODY_BYTES) {
      return send(response, 413, refusal(`The body is larger than ${PROBE_MAX_BODY_BYTES} bytes`, "payload_too_large"));
    }
    if (unverified >= config.maxUnverifiedRequests) {
      deps.logger.log("warn", "prober.busy", { unverified });
      return send(response, 503, refusal("Too many requests are being read; try again shortly", "prober_busy"), {
        "Retry-After": "1",
        Connection: "close",
      });
    }
    unverified += 1;
    let body: Buffer;
    let signed: boolean;
    try {
      body = await readBody(request, PROBE_MAX_BODY_BYTES);
      signed = await verifyBridgeSignature(config.secret, signature, { method: "POST", path, body: new Uint8Array(body) });
    } catch (error) {
      if (error instanceof BodyTooLarge)
        return send(response, 413, refusal(`The body is larger than ${PROBE_MAX_BODY_BYTES} bytes`, "payload_too_large"));
      if (error instanceof BodyIncomplete) return deps.logger.log("warn", "prober.body_incomplete", { timeout_ms: config.requestTimeoutMs });
      throw error;
    } finally {
      unverified -= 1;
    }
    if (!signed) return send(response, 401, refusal("Bad signature", BRIDGE_SIGNATURE_REFUSED));
    let json: unknown;
    try {
      json = JSON.parse(body.toString("utf8"));
    } catch {
      return send(response, 422, refusal("The body is not JSON", "validation_error"));
    }
    const parsed = ProbeRequest.safeParse(json);
    if (!parsed.success) {
      return send(
        response,
        422,
        refusal("Invalid probe request", "validation_error", z.flattenError(parsed.error).fieldErrors as Record<string, string[]>),
      );
    }
    const result = await runProbe(parsed.data, probeDeps);
    deps.logger.log("info", "prober.probed", {
      kind: parsed.data.kind ?? "bulk",
      account_id: parsed.data.account_id,
      addresses: parsed.data.addresses.length,
      budget_ms: parsed.data.budget_ms,
      elapsed_ms: result.elapsed_ms,
      connections: Object.values(result.connections).reduce((sum, n) => sum + n, 0),
    });
    send(response, 200, result);
  }

  return {
    listen: () =>
      new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(config.port, config.host, () => resolve((server.address() as AddressInfo).port));
      }),
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
