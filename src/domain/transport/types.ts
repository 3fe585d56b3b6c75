// How an accepted, signed message leaves the system. The send queue consumer depends only on this interface:
// SMTP to a smarthost (smtp.ts) or Cloudflare Email Sending (cloudflare.ts), chosen by TRANSPORT.

export interface Envelope {
  /** Return-Path address for MAIL FROM; "" is the null sender. */
  mailFrom: string;
  rcptTo: readonly string[];
}

/** Retrying can help (`temporary`, SMTP 4xx, network trouble, our own misconfiguration) or cannot (`permanent`, 5xx). */
export type FailureKind = "temporary" | "permanent";

/**
 * Where in the SMTP dialogue a failure happened. `connect`: the connection could not be set up or was lost during
 * session setup (TCP, TLS, timeouts, garbage instead of SMTP); replies refusing the session carry their own stage.
 */
export type SmtpStage = "connect" | "greeting" | "ehlo" | "starttls" | "auth" | "rset" | "mail" | "rcpt" | "data" | "message";

export interface SmtpReply {
  code: number;
  /** RFC 3463 code such as `5.1.1`, when the reply starts with one. */
  enhanced?: string;
  /** The reply as a single line: `550 5.1.1 <a@b>: user unknown`; multi-line replies joined with spaces. */
  response: string;
}

export type RecipientOutcome =
  | ({
      recipient: string;
      ok: true /** the provider's id of this recipient's copy, when it has one per recipient */;
      providerMessageId?: string;
    } & SmtpReply)
  | ({ recipient: string; ok: false; kind: FailureKind /** where it was refused; `rcpt` when absent */; stage?: SmtpStage } & SmtpReply);

export interface SendSuccess extends SmtpReply {
  ok: true;
  /**
   * One entry per envelope recipient. When the server accepted the message for some recipients only, the
   * rejected ones are here with `ok: false` and must be treated as failed (or retried) on their own.
   */
  perRecipient: RecipientOutcome[];
}

export interface SendFailure extends SmtpReply {
  ok: false;
  kind: FailureKind;
  stage: SmtpStage;
  /** `code` is 0 when there was no SMTP reply to classify: refused connection, timeout, connection lost. */
  connectionError: boolean;
  /**
   * Recipients the server answered for at RCPT. After a failure no entry is `ok`: a later refusal (DATA, the final
   * reply, a 421) applies to every recipient RCPT had accepted. Recipients without an entry share the failure.
   */
  perRecipient?: RecipientOutcome[];
}

export type SendOutcome = SendSuccess | SendFailure;

export interface Transport {
  /**
   * Sends one message. Never throws for delivery problems: every SMTP or network failure is an outcome. Calls
   * may overlap; an implementation serialises them if its connection requires it.
   */
  send(envelope: Envelope, raw: string | Uint8Array): Promise<SendOutcome>;
  /**
   * Starts setting up the connection now, so that its hand-shakes overlap the caller's other work (claiming a batch,
   * building the first message). Never throws: a failure is what the next send reports.
   */
  warm(): void;
  /** Ends the session politely (QUIT) and releases the connection. The transport may be used again afterwards. */
  close(): Promise<void>;
}
