import type { SMTPServer, SMTPServerSession } from "smtp-server";
import type { BridgeConfig } from "./config.ts";
import type { LogFields, Logger } from "./log.ts";
import { replies, type SmtpReplyError } from "./replies.ts";
import type { ByteBudget } from "./spool.ts";
import type { RelayIdentity, WorkerClient } from "./worker-client.ts";

// What the SMTP phase handlers (phases/*.ts) share: the bridge's configuration and collaborators, and the open
// sessions. server.ts builds one BridgeContext per bridge; the handlers keep no other state between sessions.

export type Connection = SMTPServer["connections"] extends Set<infer C> ? C : never;

export interface SessionState {
  connection: Connection | undefined;
  remoteAddress: string;
  inData: boolean;
  transactionStartedAt: number | undefined;
}

/** The open sessions by id, and how many come from each address (MAX_CONNECTIONS_PER_IP). */
export class Sessions {
  private readonly byId = new Map<string, SessionState>();
  private readonly perIp = new Map<string, number>();
  private onEmpty: (() => void) | undefined;

  get size(): number {
    return this.byId.size;
  }

  get(id: string): SessionState | undefined {
    return this.byId.get(id);
  }

  values(): IterableIterator<SessionState> {
    return this.byId.values();
  }

  countFrom(ip: string): number {
    return this.perIp.get(ip) ?? 0;
  }

  add(id: string, state: SessionState): void {
    this.byId.set(id, state);
    this.perIp.set(state.remoteAddress, this.countFrom(state.remoteAddress) + 1);
  }

  /** Forgets a session; unknown ids (refused at connect, never counted) are ignored. */
  remove(id: string): void {
    const state = this.byId.get(id);
    if (!state) return;
    this.byId.delete(id);
    const left = this.countFrom(state.remoteAddress) - 1;
    if (left > 0) this.perIp.set(state.remoteAddress, left);
    else this.perIp.delete(state.remoteAddress);
    if (this.byId.size === 0) this.onEmpty?.();
  }

  /** Resolves once no session is open (for close() to wait on). */
  drained(): Promise<void> {
    return new Promise((resolve) => {
      this.onEmpty = resolve;
      if (this.byId.size === 0) resolve();
    });
  }
}

export interface BridgeContext {
  readonly config: BridgeConfig;
  readonly logger: Logger;
  /** Clock (ms) for caches and transaction timings. */
  readonly now: () => number;
  readonly worker: WorkerClient;
  readonly sessions: Sessions;
  /** DATA bytes held by all sessions together (MAX_BYTES_IN_FLIGHT). */
  readonly inFlight: ByteBudget;
  /** True once close() has begun: no new connections or transactions. */
  readonly shuttingDown: boolean;
  /** The smtp-server connection carrying a session, found across the three listeners. */
  connectionOf(session: SMTPServerSession): Connection | undefined;
}

/** Who a session authenticated as: the Worker's identity, kept on smtp-server's `session.user`. */
export interface RelayUser extends RelayIdentity {
  username: string;
}

export const relayUserOf = (session: SMTPServerSession): RelayUser | undefined => {
  const user: unknown = session.user;
  return typeof user === "object" && user !== null && "credentialId" in user ? (user as RelayUser) : undefined;
};

export const isLoopback = (address: string) => /^(?:::ffff:)?127\./.test(address) || address === "::1";

export const describeReply = (error: SmtpReplyError) => `${error.responseCode} ${error.message}`;

/** 421 to a session; smtp-server closes the connection after sending it. */
export function hangUp(state: SessionState): void {
  const reply = replies.shuttingDown();
  state.connection?.send(reply.responseCode, reply.message);
}

/** One `smtp.transaction` line per MAIL FROM…DATA, whatever ends it; the next transaction's clock starts afresh. */
export function logTransaction(context: BridgeContext, session: SMTPServerSession, state: SessionState | undefined, fields: LogFields): void {
  const user = relayUserOf(session);
  const started = state?.transactionStartedAt;
  context.logger.log("info", "smtp.transaction", {
    session_id: session.id,
    remote_ip: session.remoteAddress,
    credential_id: user?.credentialId,
    account_id: user?.accountId,
    mail_from: session.envelope.mailFrom ? session.envelope.mailFrom.address : undefined,
    recipients: session.envelope.rcptTo.length,
    ms: started === undefined ? undefined : context.now() - started,
    ...fields,
  });
  if (state) state.transactionStartedAt = undefined;
}

// dot-atom local part (no quoted strings), a domain of LDH labels with a letter TLD; 254 characters at most.
const mailboxPattern =
  /^[^\s@<>()[\],;:"\\.]+(?:\.[^\s@<>()[\],;:"\\.]+)*@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+(?:[A-Za-z]{2,63}|xn--[A-Za-z0-9-]{1,59})$/;
export const isValidMailbox = (address: string) => address.length <= 254 && mailboxPattern.test(address);
