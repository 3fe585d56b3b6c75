// SMTP client over `cloudflare:sockets`, for handing signed messages to a smarthost (SES, Postmark, Mailgun,
// an own Postfix). Written here because no npm SMTP client runs on `cloudflare:sockets` and does what a queue
// consumer needs: nodemailer needs Node's net/tls; worker-mailer (the one Workers client) builds its own MIME
// instead of sending our DKIM-signed bytes, fails the whole message on the first rejected RCPT, opens a new
// session per mailer without RSET-based reuse and reports errors as strings without SMTP codes.
//
// One SmtpTransport holds one connection and reuses it for every message of a queue batch: RSET before each
// further transaction, a fresh connection when the server has closed the idle one. Commands are pipelined
// (RFC 2920) when the server offers it, so a message costs one round trip plus DATA.

import { ConfigError, type Config } from "../../config";
import {
  encodeDataPayload,
  ENVELOPE_ADDRESS,
  SmtpConnection,
  SmtpConnectionError,
  SmtpReplyError,
  type ResolvedOptions,
  type SmtpSecurity,
  type SmtpTransportOptions,
} from "./smtp-connection";
import type { Envelope, FailureKind, RecipientOutcome, SendFailure, SendOutcome, SmtpReply, SmtpStage, Transport } from "./types";

const DEFAULTS = {
  clientName: "localhost",
  connectTimeoutMs: 10_000,
  commandTimeoutMs: 30_000,
  dataTimeoutMs: 120_000,
  maxMessagesPerConnection: 100,
};

function kindOf(code: number): FailureKind {
  return code >= 500 && code < 600 ? "permanent" : "temporary";
}

/** A reply that ends the attempt. Replies during session setup are about our configuration or the server, not
 * the message: retrying later (or after fixing the credentials) can succeed, so they never count as a bounce. */
function replyFailure(stage: SmtpStage, reply: SmtpReply, extra: { kind?: FailureKind; perRecipient?: RecipientOutcome[] } = {}): SendFailure {
  const sessionStage = stage === "greeting" || stage === "ehlo" || stage === "starttls" || stage === "auth" || stage === "rset";
  return {
    ok: false,
    // 421: the server is shutting the session down; 530: it wants AUTH (our configuration), not a bad message.
    kind: extra.kind ?? (sessionStage || reply.code === 421 || reply.code === 530 ? "temporary" : kindOf(reply.code)),
    stage,
    connectionError: false,
    ...stripReply(reply),
    ...(extra.perRecipient ? { perRecipient: extra.perRecipient } : {}),
  };
}

function connectionFailure(stage: SmtpStage, error: SmtpConnectionError): SendFailure {
  return { ok: false, kind: "temporary", stage, code: 0, response: error.message, connectionError: true };
}

/** A failure after RCPT: recipients the server had accepted share it; those it refused keep their own reply. */
function failAccepted(perRecipient: RecipientOutcome[], stage: SmtpStage, reply: SmtpReply, kind: FailureKind): RecipientOutcome[] {
  return perRecipient.map((outcome) => (outcome.ok ? { recipient: outcome.recipient, ok: false, kind, stage, ...stripReply(reply) } : outcome));
}

function stripReply(reply: SmtpReply): SmtpReply {
  return { code: reply.code, response: reply.response, ...(reply.enhanced ? { enhanced: reply.enhanced } : {}) };
}

/** A reused connection turned out dead before the transaction started: safe to retry on a new one. */
class StaleConnection extends Error {
  override name = "StaleConnection";
}

/** A connection failure inside a transaction, with the stage it happened in. */
class StageError extends Error {
  override name = "StageError";
  constructor(
    readonly stage: SmtpStage,
    readonly failure: SmtpConnectionError,
  ) {
    super(failure.message);
  }
}

export class SmtpTransport implements Transport {
  private readonly options: ResolvedOptions;
  private connection: SmtpConnection | null = null;
  /** A connection being set up by warm(), not yet taken by a send. */
  private opening: Promise<SmtpConnection> | null = null;
  private tail: Promise<unknown> = Promise.resolve();
  /** Sends and closes queued behind the running one. */
  private waiting = 0;
  /**
   * The message whose final reply is still to be read: written while another send was waiting, whose commands are
   * then pipelined behind its final dot (RFC 2920 §3.1), so a message costs one round trip instead of two.
   */
  private unsettled: { connection: SmtpConnection; perRecipient: RecipientOutcome[]; settle: (outcome: SendOutcome) => void } | null = null;
  /** The last message's DATA payload: a message sent once per recipient (one VERP envelope each) is encoded once. */
  private encoded: { raw: string | Uint8Array; data: { payload: Uint8Array; eightBit: boolean } } | null = null;

  constructor(options: SmtpTransportOptions) {
    this.options = {
      ...options,
      clientName: options.clientName ?? DEFAULTS.clientName,
      connectTimeoutMs: options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
      commandTimeoutMs: options.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs,
      dataTimeoutMs: options.dataTimeoutMs ?? DEFAULTS.dataTimeoutMs,
      pipelining: options.pipelining ?? true,
      authMechanisms: options.authMechanisms ?? ["PLAIN", "LOGIN"],
      maxMessagesPerConnection: options.maxMessagesPerConnection ?? DEFAULTS.maxMessagesPerConnection,
    };
  }

  async send(envelope: Envelope, raw: string | Uint8Array): Promise<SendOutcome> {
    if (envelope.mailFrom !== "" && !ENVELOPE_ADDRESS.test(envelope.mailFrom)) {
      return replyFailure("mail", { code: 0, response: `invalid envelope sender ${JSON.stringify(envelope.mailFrom)}` }, { kind: "permanent" });
    }
    const invalid = envelope.rcptTo.find((rcpt) => !ENVELOPE_ADDRESS.test(rcpt));
    if (invalid !== undefined || envelope.rcptTo.length === 0) {
      const response = invalid !== undefined ? `invalid envelope recipient ${JSON.stringify(invalid)}` : "no recipients";
      return replyFailure("rcpt", { code: 0, response }, { kind: "permanent" });
    }
    if (this.encoded?.raw !== raw) this.encoded = { raw, data: encodeDataPayload(raw) };
    const { data } = this.encoded;
    // Wrapped, so that the queue moves on once the message is written while its final reply may still be unread.
    const { outcome } = await this.serialised(() => this.deliver(envelope, data));
    return outcome;
  }

  warm(): void {
    if (this.connection || this.opening) return;
    this.opening = this.open();
    // Unobserved until a send takes it; a warm-up that no send follows must not surface as an unhandled rejection.
    this.opening.catch(() => undefined);
  }

  close(): Promise<void> {
    return this.serialised(async () => {
      await this.settle();
      const connection = this.connection ?? (await this.opening?.catch(() => null));
      this.connection = null;
      this.opening = null;
      await connection?.quit();
    });
  }

  /** One transaction at a time on the connection; overlapping callers queue up. */
  private serialised<T>(task: () => Promise<T>): Promise<T> {
    this.waiting++;
    const start = () => {
      this.waiting--;
      return task();
    };
    const run = this.tail.then(start, start);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async deliver(
    envelope: Envelope,
    data: { payload: Uint8Array; eightBit: boolean },
  ): Promise<{ outcome: SendOutcome | Promise<SendOutcome> }> {
    for (let attempt = 0; ; attempt++) {
      let connection: SmtpConnection;
      try {
        connection = await this.connected();
      } catch (error) {
        if (error instanceof SmtpReplyError) return { outcome: replyFailure(error.stage, error.reply) };
        if (error instanceof SmtpConnectionError) return { outcome: connectionFailure("connect", error) };
        throw error;
      }
      const reused = connection.transactions > 0;
      connection.transactions++;
      let written: SendOutcome | { perRecipient: RecipientOutcome[] };
      try {
        written = await this.transaction(connection, reused, envelope, data);
      } catch (error) {
        // A message written before this one still gets its final reply if the connection gives it, else the failure.
        await this.settle();
        this.drop(connection);
        if (error instanceof StaleConnection && attempt === 0) continue;
        if (error instanceof StaleConnection) return { outcome: connectionFailure("rset", new SmtpConnectionError(error.message)) };
        if (error instanceof StageError) return { outcome: connectionFailure(error.stage, error.failure) };
        throw error;
      }
      if ("ok" in written) return { outcome: written };
      const { perRecipient } = written;
      if (this.waiting === 0 || !this.pipelines(connection)) return { outcome: await this.finalReply(connection, perRecipient) };
      // Another send is queued: it writes its commands behind this message's dot and then reads this final reply.
      return { outcome: new Promise<SendOutcome>((settle) => (this.unsettled = { connection, perRecipient, settle })) };
    }
  }

  private pipelines(connection: SmtpConnection): boolean {
    return this.options.pipelining && connection.capabilities.has("PIPELINING");
  }

  /** Reads the final reply of the message written last, if it is still unread, and hands that message its outcome. */
  private async settle(): Promise<void> {
    const pending = this.unsettled;
    if (!pending) return;
    this.unsettled = null;
    pending.settle(await this.finalReply(pending.connection, pending.perRecipient));
  }

  /**
   * The reply to the final dot decides for every recipient accepted at RCPT: a 554 content rejection or a 451 after
   * 250s to RCPT means nobody got the message.
   */
  private async finalReply(connection: SmtpConnection, perRecipient: RecipientOutcome[]): Promise<SendOutcome> {
    let final: SmtpReply;
    try {
      final = stripReply(await connection.readReply(this.options.dataTimeoutMs, "end of data"));
    } catch (error) {
      this.drop(connection);
      if (error instanceof SmtpConnectionError) return connectionFailure("message", error);
      throw error;
    }
    if (final.code === 421) {
      // The server is closing the session; whatever this transaction had achieved is void.
      this.drop(connection);
      return replyFailure("message", final, { kind: "temporary", perRecipient: failAccepted(perRecipient, "message", final, "temporary") });
    }
    if (final.code !== 250) return replyFailure("message", final, { perRecipient: failAccepted(perRecipient, "message", final, kindOf(final.code)) });
    return { ok: true, ...final, perRecipient };
  }

  private async connected(): Promise<SmtpConnection> {
    const warming = this.opening;
    if (warming) {
      // The warmed-up connection is this send's attempt: its failure is this send's outcome, as if it had connected.
      this.opening = null;
      this.connection = await warming;
      return this.connection;
    }
    const current = this.connection;
    if (current?.isOpen && current.transactions < this.options.maxMessagesPerConnection) return current;
    await this.settle();
    this.connection = null;
    if (current) await current.quit();
    this.connection = await this.open();
    return this.connection;
  }

  private async open(): Promise<SmtpConnection> {
    const connection = new SmtpConnection(this.options);
    try {
      await connection.open();
    } catch (error) {
      connection.abort();
      throw error;
    }
    return connection;
  }

  private drop(connection: SmtpConnection): void {
    connection.abort();
    if (this.connection === connection) this.connection = null;
  }

  /**
   * MAIL, RCPT per recipient, DATA, message. Returns the outcome when a reply ends the transaction before the message
   * is written, else the recipients RCPT accepted (the final reply is read by finalReply). Throws StaleConnection when
   * a reused connection is found dead at RSET, StageError for any other connection failure.
   */
  private async transaction(
    connection: SmtpConnection,
    reused: boolean,
    envelope: Envelope,
    data: { payload: Uint8Array; eightBit: boolean },
  ): Promise<SendOutcome | { perRecipient: RecipientOutcome[] }> {
    const { commandTimeoutMs, dataTimeoutMs } = this.options;
    const caps = connection.capabilities;
    const params: string[] = [];
    if (caps.has("SIZE")) params.push(`SIZE=${data.payload.length}`);
    if (data.eightBit && caps.has("8BITMIME")) params.push("BODY=8BITMIME");
    const addresses = [envelope.mailFrom, ...envelope.rcptTo];
    if (caps.has("SMTPUTF8") && addresses.some((address) => /[^\x00-\x7f]/.test(address))) params.push("SMTPUTF8");
    const mailCommand = `MAIL FROM:<${envelope.mailFrom}>${params.length > 0 ? ` ${params.join(" ")}` : ""}\r\n`;
    const rcptCommands = envelope.rcptTo.map((rcpt) => `RCPT TO:<${rcpt}>\r\n`);
    const pipelined = this.pipelines(connection);

    let stage: SmtpStage = "rset";
    const step = async <T>(operation: () => Promise<T>): Promise<T> => {
      try {
        return await operation();
      } catch (error) {
        throw error instanceof SmtpConnectionError ? new StageError(stage, error) : error;
      }
    };
    const write = (text: string) => step(() => connection.write(text, commandTimeoutMs));
    const read = (what: string) => step(async () => stripReply(await connection.readReply(commandTimeoutMs, what)));
    /** 421: the server is closing the session; whatever this transaction had achieved is void. */
    const closing = (reply: SmtpReply, accepted?: RecipientOutcome[]) => {
      this.drop(connection);
      return replyFailure(stage, reply, {
        kind: "temporary",
        ...(accepted ? { perRecipient: failAccepted(accepted, stage, reply, "temporary") } : {}),
      });
    };

    if (pipelined) {
      await write([reused ? "RSET\r\n" : "", mailCommand, ...rcptCommands, "DATA\r\n"].join(""));
    }
    if (this.unsettled) {
      // The previous message's final reply comes first. After a 421 or a lost connection nothing of this message
      // was accepted: it is retried on a new connection.
      await this.settle();
      if (!connection.isOpen) throw new StaleConnection("the connection ended after the previous message");
    }
    if (reused) {
      let rset: SmtpReply;
      try {
        if (!pipelined) await connection.write("RSET\r\n", commandTimeoutMs);
        rset = await connection.readReply(commandTimeoutMs, "RSET");
      } catch (error) {
        // The server closed the idle connection between messages: nothing of this message was accepted.
        if (error instanceof SmtpConnectionError) throw new StaleConnection(error.message);
        throw error;
      }
      if (rset.code === 421) throw new StaleConnection(rset.response);
      if (rset.code !== 250) {
        this.drop(connection);
        return replyFailure("rset", rset);
      }
    }

    stage = "mail";
    if (!pipelined) await write(mailCommand);
    const mail = await read("MAIL FROM");
    if (mail.code === 421) return closing(mail);
    const mailAccepted = mail.code === 250;

    stage = "rcpt";
    const perRecipient: RecipientOutcome[] = [];
    if (mailAccepted || pipelined) {
      for (const [i, rcpt] of envelope.rcptTo.entries()) {
        if (!pipelined) await write(rcptCommands[i]!);
        const reply = await read("RCPT TO");
        if (reply.code === 421) return closing(reply, perRecipient);
        perRecipient.push(
          reply.code === 250 || reply.code === 251
            ? { recipient: rcpt, ok: true, ...reply }
            : { recipient: rcpt, ok: false, kind: kindOf(reply.code), ...reply },
        );
      }
    }
    const anyAccepted = perRecipient.some((outcome) => outcome.ok);

    stage = "data";
    let dataReply: SmtpReply | undefined;
    if (pipelined) {
      dataReply = await read("DATA");
    } else if (mailAccepted && anyAccepted) {
      await write("DATA\r\n");
      dataReply = await read("DATA");
    }
    if (dataReply?.code === 421) return closing(dataReply, perRecipient);

    if (!mailAccepted || !anyAccepted) {
      // With PIPELINING the server has answered DATA already; a 354 without any valid recipient needs the
      // terminating dot to return to command state, and the server has nobody to deliver the empty message to.
      if (dataReply?.code === 354) {
        await write(".\r\n");
        await read("end of data");
      }
      if (!mailAccepted) return replyFailure("mail", mail);
      const allPermanent = perRecipient.every((outcome) => !outcome.ok && outcome.kind === "permanent");
      const first = perRecipient[0]!;
      return replyFailure("rcpt", first, { kind: allPermanent ? "permanent" : "temporary", perRecipient });
    }
    if (dataReply?.code !== 354) {
      const refusal = dataReply ?? { code: 0, response: "DATA was not sent" };
      return replyFailure("data", refusal, { perRecipient: failAccepted(perRecipient, "data", refusal, kindOf(refusal.code)) });
    }

    stage = "message";
    await step(() => connection.write(data.payload, dataTimeoutMs));
    return { perRecipient };
  }
}

const DEFAULT_PORTS: Record<SmtpSecurity, number> = { tls: 465, starttls: 587, off: 25 };

/** EHLO name from SITE_URL's host: smarthosts log it and some reject a bare `localhost`. */
function clientNameFrom(siteUrl: string): string {
  const host = new URL(siteUrl).hostname;
  if (/^\d{1,3}(\.\d{1,3}){3}$/.test(host)) return `[${host}]`;
  if (host.startsWith("[")) return `[IPv6:${host.slice(1, -1)}]`;
  return host || DEFAULTS.clientName;
}

/** The transport configured by `SMTP_UPSTREAM_*`; throws a readable error when no host is set. */
export function smtpTransportFromConfig(config: Pick<Config, "smtp" | "siteUrl">, overrides: Partial<SmtpTransportOptions> = {}): SmtpTransport {
  const { host, port, secure, user, pass } = config.smtp;
  if (!host) throw new ConfigError("invalid configuration: SMTP_UPSTREAM_HOST is not set");
  return new SmtpTransport({
    host,
    port: port ?? DEFAULT_PORTS[secure],
    secure,
    clientName: clientNameFrom(config.siteUrl),
    ...(user ? { user, pass: pass ?? "" } : {}),
    ...overrides,
  });
}
