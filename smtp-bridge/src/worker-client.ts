import { Agent as HttpAgent, request as httpRequest, type ClientRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import {
  BRIDGE_SIGNATURE_HEADER,
  BRIDGE_SIGNATURE_REFUSED,
  ErrorResponse,
  RELAY_BASE_PATH,
  relayEndpoints,
  signBridgeRequest,
  type MessageRequest,
} from "@mailforge/bridge-contract";
import type { z } from "zod";
import type { MessageBytes } from "./spool.ts";

// The bridge's only way into Mailforge: signed JSON requests to the Worker's /internal/relay routes. Paths, bodies
// and the signature are the contract both sides import (packages/bridge-contract); this file only carries them
// over HTTP, streaming the one large body there is.

/**
 * Base64 of a byte stream, chunk by chunk: each chunk's leftover bytes (beyond a multiple of 3) are carried into the
 * next, so the result is identical to encoding the whole at once.
 */
async function* base64Chunks(chunks: AsyncIterable<Buffer>): AsyncIterable<Buffer> {
  let carry = Buffer.alloc(0);
  for await (const chunk of chunks) {
    const joined = carry.length === 0 ? chunk : Buffer.concat([carry, chunk]);
    const whole = joined.length - (joined.length % 3);
    carry = Buffer.from(joined.subarray(whole));
    if (whole > 0) yield Buffer.from(joined.subarray(0, whole).toString("base64"), "latin1");
  }
  if (carry.length > 0) yield Buffer.from(carry.toString("base64"), "latin1");
}

/** A definite answer from the Worker other than success: the request was understood and refused. */
export interface WorkerRefusal {
  status: number;
  code: string;
  message: string;
  retryAfterSeconds?: number;
  errors?: Record<string, string[]>;
}

export type WorkerResult<T> = { ok: true; value: T } | { ok: false; refusal: WorkerRefusal };

/**
 * The Worker could not give a definite answer: unreachable, timed out, 5xx, or a reply the bridge cannot read.
 * The bridge then answers 4xx so the client keeps the message and retries; it never acknowledges a message
 * the Worker has not confirmed storing.
 */
export class WorkerUnavailableError extends Error {
  override name = "WorkerUnavailableError";
}

export interface RelayIdentity {
  credentialId: string;
  accountId: string;
  /** The pipeline's recipient cap for this credential's messages, enforced at RCPT TO. */
  maxRecipients: number;
}

export interface AcceptedMessage {
  id: string;
  creditsCharged: number;
  /** The Worker had already stored this very submission (a client's retry): `id` is that message's. */
  replayed: boolean;
}

export interface SubmittedMessage {
  credentialId: string;
  mailFrom: string;
  rcptTo: string[];
  /** The DATA bytes exactly as received (dot-unstuffed); forwarded unchanged. */
  raw: MessageBytes;
}

export interface WorkerClient {
  authenticate(username: string, password: string): Promise<WorkerResult<RelayIdentity>>;
  checkSender(credentialId: string, mailFrom: string): Promise<WorkerResult<void>>;
  submitMessage(message: SubmittedMessage): Promise<WorkerResult<AcceptedMessage>>;
  /** Closes the idle keep-alive connections (at shutdown). */
  close?(): void;
}

export interface WorkerClientOptions {
  workerUrl: string;
  bridgeSecret: string;
  timeoutMs: number;
  /** Keep-alive connections to the Worker at most (WORKER_MAX_SOCKETS). */
  maxSockets?: number;
}

/** What the client needs to know of a route in `relayEndpoints`. */
interface Endpoint<Q extends z.ZodType, R extends z.ZodType> {
  path: string;
  status: number;
  request: Q;
  response: R;
}

/** A request body as parts, produced on demand: once to sign it, once to send it. */
interface RequestBody {
  length: number;
  parts(): AsyncIterable<Uint8Array> | Iterable<Uint8Array>;
}

const jsonBody = (payload: unknown): RequestBody => {
  const bytes = Buffer.from(JSON.stringify(payload));
  return { length: bytes.length, parts: () => [bytes] };
};

/** Until the socket has taken what was written, or the request is gone. */
const drained = (request: ClientRequest) =>
  new Promise<void>((resolve) => {
    const done = () => {
      request.off("drain", done).off("close", done);
      resolve();
    };
    request.on("drain", done).on("close", done);
  });

/**
 * One POST with node:http(s) rather than fetch: its write() and 'drain' keep a streamed body to what the socket has
 * taken (Node's fetch copied and queued the parts of an async iterable body: 10 × 20 MiB messages cost 300 MiB).
 */
function postBody(
  url: URL,
  agent: HttpAgent,
  headers: Record<string, string>,
  body: RequestBody,
  signal: AbortSignal,
): Promise<{ status: number; text: string; retryAfter: string | null }> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    const request = send(url, { method: "POST", agent, headers: { ...headers, "Content-Length": String(body.length) }, signal }, (response) => {
      const chunks: Buffer[] = [];
      response.on("data", (chunk: Buffer) => chunks.push(chunk));
      response.once("error", reject);
      response.once("end", () => {
        const retryAfter = response.headers["retry-after"];
        resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), retryAfter: retryAfter ?? null });
      });
    });
    request.once("error", reject);
    void (async () => {
      for await (const part of body.parts()) {
        if (request.destroyed) return;
        if (!request.write(part)) await drained(request);
      }
      request.end();
    })().catch((error: unknown) => request.destroy(error as Error));
  });
}

export function createWorkerClient(options: WorkerClientOptions): WorkerClient {
  // One pool of kept-alive connections for every session: a message costs the request, not a TCP (and TLS) handshake.
  // LIFO reuses the most recently used socket, so an idle surplus times out instead of being kept warm in turn.
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 64, scheduling: "lifo" as const };
  const agent = options.workerUrl.startsWith("https:") ? new HttpsAgent(agentOptions) : new HttpAgent(agentOptions);

  async function post(path: string, body: RequestBody): Promise<{ status: number; body: unknown; retryAfter: string | null }> {
    const url = new URL(`${options.workerUrl}${RELAY_BASE_PATH}${path}`);
    // signed over the path as it goes on the wire, which is what the Worker checks
    const signature = await signBridgeRequest(options.bridgeSecret, { method: "POST", path: url.pathname, body: body.parts() });
    let answer: { status: number; text: string; retryAfter: string | null };
    try {
      answer = await postBody(
        url,
        agent,
        { "Content-Type": "application/json", [BRIDGE_SIGNATURE_HEADER]: signature },
        body,
        AbortSignal.timeout(options.timeoutMs),
      );
    } catch (error) {
      throw new WorkerUnavailableError(`Worker ${path} unreachable: ${(error as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(answer.text);
    } catch {
      // a proxy's HTML error page, a truncated body: not an answer the bridge can act on
      throw new WorkerUnavailableError(`Worker ${path} answered ${answer.status} without a JSON body`);
    }
    if (answer.status >= 500) throw new WorkerUnavailableError(`Worker ${path} answered ${answer.status}`);
    const error = ErrorResponse.safeParse(parsed);
    if (answer.status === 401 && error.success && error.data.code === BRIDGE_SIGNATURE_REFUSED) {
      // the operator's to fix (BRIDGE_SECRET, the clock, the bridge's version), never the client's: it keeps the message
      throw new WorkerUnavailableError(`Worker ${path} refused the bridge's signature: ${error.data.message}`);
    }
    return { status: answer.status, body: parsed, retryAfter: answer.retryAfter };
  }

  function refusal(status: number, body: unknown, retryAfter: string | null): WorkerRefusal {
    const error = ErrorResponse.safeParse(body);
    const seconds = retryAfter === null ? NaN : Number(retryAfter);
    return {
      status,
      code: error.success ? error.data.code : "unknown",
      message: error.success ? error.data.message : `refused with status ${status}`,
      errors: error.success ? error.data.errors : undefined,
      retryAfterSeconds: Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined,
    };
  }

  async function call<R extends z.ZodType>(endpoint: Endpoint<z.ZodType, R>, payload: RequestBody): Promise<WorkerResult<z.infer<R>>> {
    const { status, body, retryAfter } = await post(endpoint.path, payload);
    if (status !== endpoint.status) return { ok: false, refusal: refusal(status, body, retryAfter) };
    const read = endpoint.response.safeParse(body);
    if (!read.success) {
      throw new WorkerUnavailableError(`Worker ${endpoint.path} answered ${status} with an unexpected body: ${read.error.message}`);
    }
    return { ok: true, value: read.data };
  }

  const callJson = <Q extends z.ZodType, R extends z.ZodType>(endpoint: Endpoint<Q, R>, payload: z.input<Q>) => call(endpoint, jsonBody(payload));

  return {
    async authenticate(username, password) {
      const result = await callJson(relayEndpoints.auth, { username, password });
      if (!result.ok) return result;
      const identity = result.value;
      return { ok: true, value: { credentialId: identity.credential_id, accountId: identity.account_id, maxRecipients: identity.max_recipients } };
    },
    async checkSender(credentialId, mailFrom) {
      const result = await callJson(relayEndpoints.sender, { credential_id: credentialId, mail_from: mailFrom });
      return result.ok ? { ok: true, value: undefined } : result;
    },
    async submitMessage(message) {
      // {"credential_id":…,"mail_from":…,"rcpt_to":[…],"raw":"<base64>"}, the base64 made as the bytes are sent
      const envelope: Omit<z.input<typeof MessageRequest>, "raw"> = {
        credential_id: message.credentialId,
        mail_from: message.mailFrom,
        rcpt_to: message.rcptTo,
      };
      const open = Buffer.from(`${JSON.stringify(envelope).slice(0, -1)},"raw":"`);
      const close = Buffer.from('"}');
      const result = await call(relayEndpoints.messages, {
        length: open.length + 4 * Math.ceil(message.raw.size / 3) + close.length,
        async *parts() {
          yield open;
          yield* base64Chunks(message.raw.chunks());
          yield close;
        },
      });
      if (!result.ok) return result;
      const accepted = result.value;
      return { ok: true, value: { id: accepted.id, creditsCharged: accepted.credits_charged, replayed: accepted.replayed } };
    },
    close() {
      agent.destroy();
    },
  };
}
