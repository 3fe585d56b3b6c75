import { createHmac } from "node:crypto";
import { z } from "zod";

// The bridge's only way into Mailforge: signed JSON requests to the Worker's /internal/relay routes. The signature
// is the same scheme as outgoing webhooks (`t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`), so one
// verifier on the Worker side covers both ideas and a replayed request is refused after 300 s.

export const SIGNATURE_HEADER = "X-Bridge-Signature";

export function signBridgeRequest(secret: string, body: string, nowSeconds = Math.floor(Date.now() / 1000)): string {
  const digest = createHmac("sha256", secret).update(`${nowSeconds}.${body}`).digest("hex");
  return `t=${nowSeconds},v1=${digest}`;
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
}

export interface AcceptedMessage {
  id: string;
  recipients: number;
  creditsCharged: number;
  status: string;
}

export interface SubmittedMessage {
  credentialId: string;
  mailFrom: string;
  rcptTo: string[];
  /** The DATA bytes exactly as received (dot-unstuffed); forwarded unchanged. */
  raw: Buffer;
}

export interface WorkerClient {
  authenticate(username: string, password: string): Promise<WorkerResult<RelayIdentity>>;
  checkSender(credentialId: string, mailFrom: string): Promise<WorkerResult<void>>;
  submitMessage(message: SubmittedMessage): Promise<WorkerResult<AcceptedMessage>>;
}

const identitySchema = z.object({ credential_id: z.string().min(1), account_id: z.string().min(1) });
const acceptedSchema = z.object({
  id: z.string().min(1),
  recipients: z.union([z.number().int(), z.array(z.unknown())]),
  credits_charged: z.number().int(),
  status: z.string(),
});
const errorSchema = z.object({
  message: z.string().default("refused"),
  code: z.string().default("unknown"),
  errors: z.record(z.string(), z.array(z.string())).optional(),
});

export interface WorkerClientOptions {
  workerUrl: string;
  bridgeSecret: string;
  timeoutMs: number;
  fetch?: typeof fetch;
}

export function createWorkerClient(options: WorkerClientOptions): WorkerClient {
  const fetchImpl = options.fetch ?? fetch;

  async function post(path: string, payload: unknown): Promise<{ status: number; body: unknown; retryAfter: string | null }> {
    const body = JSON.stringify(payload);
    let response: Response;
    try {
      response = await fetchImpl(`${options.workerUrl}/internal/relay${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json", [SIGNATURE_HEADER]: signBridgeRequest(options.bridgeSecret, body) },
        body,
        signal: AbortSignal.timeout(options.timeoutMs),
      });
    } catch (error) {
      throw new WorkerUnavailableError(`Worker ${path} unreachable: ${(error as Error).message}`);
    }
    let parsed: unknown;
    try {
      parsed = await response.json();
    } catch {
      // a proxy's HTML error page, a truncated body: not an answer the bridge can act on
      throw new WorkerUnavailableError(`Worker ${path} answered ${response.status} without a JSON body`);
    }
    if (response.status >= 500) throw new WorkerUnavailableError(`Worker ${path} answered ${response.status}`);
    return { status: response.status, body: parsed, retryAfter: response.headers.get("Retry-After") };
  }

  function refusal(status: number, body: unknown, retryAfter: string | null): WorkerRefusal {
    const error = errorSchema.safeParse(body);
    const seconds = retryAfter === null ? NaN : Number(retryAfter);
    return {
      status,
      code: error.success ? error.data.code : "unknown",
      message: error.success ? error.data.message : `refused with status ${status}`,
      errors: error.success ? error.data.errors : undefined,
      retryAfterSeconds: Number.isFinite(seconds) && seconds >= 0 ? seconds : undefined,
    };
  }

  async function call<T>(path: string, payload: unknown, successStatus: number, read: (body: unknown) => T): Promise<WorkerResult<T>> {
    const { status, body, retryAfter } = await post(path, payload);
    if (status !== successStatus) return { ok: false, refusal: refusal(status, body, retryAfter) };
    try {
      return { ok: true, value: read(body) };
    } catch (error) {
      throw new WorkerUnavailableError(`Worker ${path} answered ${status} with an unexpected body: ${(error as Error).message}`);
    }
  }

  return {
    authenticate: (username, password) =>
      call("/auth", { username, password }, 200, (body) => {
        const identity = identitySchema.parse(body);
        return { credentialId: identity.credential_id, accountId: identity.account_id };
      }),
    checkSender: (credentialId, mailFrom) =>
      call("/sender", { credential_id: credentialId, mail_from: mailFrom }, 200, () => undefined),
    submitMessage: (message) =>
      call(
        "/messages",
        {
          credential_id: message.credentialId,
          mail_from: message.mailFrom,
          rcpt_to: message.rcptTo,
          raw: message.raw.toString("base64"),
        },
        202,
        (body) => {
          const accepted = acceptedSchema.parse(body);
          return {
            id: accepted.id,
            recipients: Array.isArray(accepted.recipients) ? accepted.recipients.length : accepted.recipients,
            creditsCharged: accepted.credits_charged,
            status: accepted.status,
          };
        },
      ),
  };
}
