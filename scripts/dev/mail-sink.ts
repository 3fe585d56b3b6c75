import { createHash } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Server, Socket } from "node:net";
import PostalMime, { type Address } from "postal-mime";
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from "smtp-server";
import { z } from "zod";

// The dev mail sink: the local stand-in for the sending provider. It accepts every message over SMTP, keeps the raw
// bytes as received and shows them through a small HTTP inbox; programmable rules make it answer with chosen SMTP
// errors so retry and bounce handling can be tested.

const DEFAULT_MAX_MESSAGE_BYTES = 50 * 1024 * 1024;
const MAX_RULE_BODY_BYTES = 64 * 1024;

export interface MessageAddress {
  name: string;
  address: string;
}

/** What `GET /api/messages` lists for a message. */
export interface MessageSummary {
  id: string;
  /** the SMTP connection the message came over; equal for messages sent over one reused connection */
  session_id: string;
  /** when that connection was accepted: a client that connects ahead of its first message shows it here */
  connected_at: string;
  /** envelope sender, "" for the null sender */
  mail_from: string;
  rcpt_to: string[];
  /** the user of AUTH PLAIN/LOGIN, null when the client did not authenticate */
  auth_user: string | null;
  subject: string | null;
  from: MessageAddress | null;
  to: MessageAddress[];
  message_id: string | null;
  /** bytes of the raw message */
  size: number;
  received_at: string;
}

export interface StoredMessage extends MessageSummary {
  /** the message exactly as received in DATA (dot-unstuffed, without the terminating line) */
  raw: Buffer;
}

export interface MessageAttachment {
  filename: string | null;
  content_type: string;
  size: number;
  sha256: string;
}

/** What `GET /api/messages/:id` returns. */
export interface MessageDetail extends MessageSummary {
  headers: { key: string; value: string }[];
  attachments: MessageAttachment[];
  text: string | null;
  html: string | null;
}

export interface SinkStats {
  /** SMTP connections accepted */
  connections: number;
  /** messages accepted */
  messages: number;
  /** RSET commands received */
  rsets: number;
}

export interface MailSink {
  listen(opts: { smtpPort: number; httpPort: number; host?: string }): Promise<{ smtpPort: number; httpPort: number }>;
  close(): Promise<void>;
  messages(): StoredMessage[];
}

/**
 * Where a rule acts: `connect` (the greeting), `ehlo` (EHLO and HELO), `mail`, `rcpt`, `data_command` (the reply to DATA, before the
 * message) and `data` (the reply after the message, at its final dot).
 */
const smtpPhaseSchema = z.enum(["connect", "ehlo", "mail", "rcpt", "data_command", "data"]);
type SmtpPhase = z.infer<typeof smtpPhaseSchema>;

const smtpReplySchema = z.union([
  z.object({
    code: z.number().int().min(400).max(599),
    message: z.string().min(1),
  }),
  /** close the connection without answering, as a crashed or overloaded server does */
  z.object({ drop: z.literal(true) }),
]);
type SmtpReply = z.infer<typeof smtpReplySchema>;
type SmtpErrorReply = Extract<SmtpReply, { code: number }>;

const failureRuleSchema = z.object({
  /**
   * "*" or an address, compared case-insensitively: for phase rcpt the recipient of the RCPT command, for
   * data_command and data any recipient of the transaction, for mail the MAIL FROM address; connect and ehlo rules
   * match "*" only
   */
  match: z.string().min(1),
  phase: smtpPhaseSchema,
  /** replies given to the next matching commands, one each, in order */
  responses: z.array(smtpReplySchema).min(1),
  /** how many times the list of responses is played, 1 by default */
  times: z.number().int().positive().optional(),
});
type FailureRuleInput = z.infer<typeof failureRuleSchema>;

interface FailureRule extends FailureRuleInput {
  id: string;
  times: number;
  pending: SmtpReply[];
}

function describeRule(rule: FailureRule) {
  const { pending, ...rest } = rule;
  return { ...rest, remaining: pending.length };
}

function smtpError(reply: SmtpErrorReply): Error {
  return Object.assign(new Error(reply.message), { responseCode: reply.code });
}

/** The parts of smtp-server's (untyped) SMTPConnection the sink reaches into: its per-command handlers and socket. */
type CommandHandler = (command: Buffer, callback: () => void) => void;
interface ConnectionInternals {
  session: SMTPServerSession;
  send(code: number, message: string): void;
  close(): void;
  _socket: Socket;
  handler_RSET?: CommandHandler;
  handler_EHLO?: CommandHandler;
  handler_HELO?: CommandHandler;
  handler_DATA?: CommandHandler;
}

function mailboxes(addresses: Address[] | undefined): MessageAddress[] {
  return (addresses ?? []).flatMap((address) => (address.group ? address.group : [{ name: address.name, address: address.address }]));
}

type HeaderFields = Pick<MessageSummary, "subject" | "from" | "to" | "message_id">;

async function headerFields(raw: Buffer): Promise<HeaderFields> {
  try {
    const email = await PostalMime.parse(raw);
    return {
      subject: email.subject ?? null,
      from: mailboxes(email.from ? [email.from] : [])[0] ?? null,
      to: mailboxes(email.to),
      message_id: email.messageId ?? null,
    };
  } catch {
    // unparseable content is still delivered and kept byte for byte
    return { subject: null, from: null, to: [], message_id: null };
  }
}

async function describeMessage(message: StoredMessage): Promise<MessageDetail> {
  const { raw, ...summary } = message;
  const email = await PostalMime.parse(raw, { attachmentEncoding: "arraybuffer" });
  return {
    ...summary,
    headers: email.headers.map(({ key, value }) => ({ key, value })),
    attachments: email.attachments.map((attachment) => {
      const content = typeof attachment.content === "string" ? Buffer.from(attachment.content) : Buffer.from(attachment.content as ArrayBuffer);
      return {
        filename: attachment.filename,
        content_type: attachment.mimeType,
        size: content.length,
        sha256: createHash("sha256").update(content).digest("hex"),
      };
    }),
    text: email.text ?? null,
    html: email.html ?? null,
  };
}

function summaryOf(message: StoredMessage): MessageSummary {
  const { raw: _raw, ...summary } = message;
  return summary;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload) });
  res.end(payload);
}

function sendError(res: ServerResponse, status: number, code: string, message: string, errors?: Record<string, string[]>) {
  sendJson(res, status, { message, code, ...(errors ? { errors } : {}) });
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_RULE_BODY_BYTES) throw new Error("request body too large");
    chunks.push(chunk);
  }
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function listenOn(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

export function createMailSink(options: { maxMessageBytes?: number } = {}): MailSink {
  const stored: StoredMessage[] = [];
  let rules: FailureRule[] = [];
  let stats: SinkStats = { connections: 0, messages: 0, rsets: 0 };
  let nextMessageId = 1;
  const connectedAt = new WeakMap<SMTPServerSession, string>();
  /**
   * While held, messages (to `to`, or all) wait at their final dot, unanswered and unstored; releasing answers them
   * in order.
   */
  let hold: { released: Promise<void>; release: () => void; waiting: number; to: string | null } | null = null;
  let nextRuleId = 1;

  function takeReply(phase: SmtpPhase, addresses: string[]): SmtpReply | undefined {
    const candidates = addresses.map((address) => address.toLowerCase());
    const rule = rules.find((r) => r.phase === phase && r.pending.length > 0 && (r.match === "*" || candidates.includes(r.match.toLowerCase())));
    return rule?.pending.shift();
  }

  function connectionOf(session: SMTPServerSession): ConnectionInternals | undefined {
    return [...smtp.connections].find((c) => c.session === session) as unknown as ConnectionInternals | undefined;
  }

  /** Plays a rule's reply: an SMTP error through `reject`, or a dropped connection. */
  function play(session: SMTPServerSession, reply: SmtpReply | undefined, reject: (error: Error) => void, accept: () => void): void {
    if (!reply) {
      accept();
      return;
    }
    if ("drop" in reply) {
      connectionOf(session)?._socket.destroy();
      return;
    }
    reject(smtpError(reply));
  }

  /**
   * smtp-server has no hooks for RSET, EHLO/HELO and the DATA command itself; wrap the command handlers of this one
   * connection to count resets and to play `ehlo` and `data_command` rules.
   */
  function instrument(session: SMTPServerSession): void {
    const connection = connectionOf(session);
    if (!connection) return;
    const wrap = (name: "handler_RSET" | "handler_EHLO" | "handler_HELO" | "handler_DATA", before: (callback: () => void) => boolean) => {
      const original = connection[name];
      if (typeof original !== "function") return;
      connection[name] = function (command, callback) {
        if (!before(callback)) original.call(this, command, callback);
      };
    };
    wrap("handler_RSET", () => {
      stats.rsets += 1;
      return false;
    });
    const refuseCommand = (phase: SmtpPhase, addresses: () => string[]) => (callback: () => void) => {
      const reply = takeReply(phase, addresses());
      if (!reply) return false;
      if ("drop" in reply) connection._socket.destroy();
      else {
        connection.send(reply.code, reply.message);
        if (reply.code === 421) connection.close();
        callback();
      }
      return true;
    };
    // HELO too: a client whose EHLO is refused falls back to it.
    wrap(
      "handler_EHLO",
      refuseCommand("ehlo", () => []),
    );
    wrap(
      "handler_HELO",
      refuseCommand("ehlo", () => []),
    );
    wrap(
      "handler_DATA",
      refuseCommand("data_command", () => session.envelope.rcptTo.map((rcpt) => rcpt.address)),
    );
  }
  const smtp = new SMTPServer({
    name: "mail-sink.local",
    banner: "mailforge dev mail sink",
    size: options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES,
    rejectOversized: true,
    authOptional: true,
    allowInsecureAuth: true,
    authMethods: ["PLAIN", "LOGIN"],
    disabledCommands: ["STARTTLS"],
    disableReverseLookup: true,
    logger: false,
    onConnect(session, callback) {
      stats.connections += 1;
      connectedAt.set(session, new Date().toISOString());
      instrument(session);
      play(session, takeReply("connect", []), callback, () => callback());
    },
    onAuth(auth, _session, callback) {
      callback(null, { user: auth.username ?? "" });
    },
    onMailFrom(address, session, callback) {
      play(session, takeReply("mail", [address.address]), callback, () => callback());
    },
    onRcptTo(address, session, callback) {
      play(session, takeReply("rcpt", [address.address]), callback, () => callback());
    },
    onData(stream, session, callback) {
      receive(stream, session).then(
        (id) => callback(null, `Ok: queued as ${id}`),
        (error: unknown) => callback(error as Error),
      );
    },
  });
  // A client that drops its connection mid-transaction (a test runtime shutting down, a killed process) surfaces
  // here as ECONNRESET; without a listener the error would take the whole sink, and the process, down.
  smtp.on("error", () => {});

  /** Stores one message from DATA and returns its id, or throws the SMTP error to answer with. */
  async function receive(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string> {
    const raw = Buffer.concat((await stream.toArray()) as Buffer[]);
    if (stream.sizeExceeded) throw smtpError({ code: 552, message: "5.3.4 Message too big" });
    const rcptTo = session.envelope.rcptTo.map((rcpt) => rcpt.address);
    if (hold && (hold.to === null || rcptTo.some((address) => address.toLowerCase() === hold?.to))) {
      const current = hold;
      current.waiting++;
      await current.released;
    }
    const reply = takeReply("data", rcptTo);
    if (reply && "drop" in reply) {
      connectionOf(session)?._socket.destroy();
      // never answered: the client sees the connection close after its final dot
      return new Promise<never>(() => undefined);
    }
    if (reply) throw smtpError(reply);

    const receivedAt = new Date().toISOString();
    const fields = await headerFields(raw);
    const id = String(nextMessageId++);
    const summary: MessageSummary = {
      id,
      session_id: session.id,
      connected_at: connectedAt.get(session) ?? receivedAt,
      mail_from: session.envelope.mailFrom ? session.envelope.mailFrom.address : "",
      rcpt_to: rcptTo,
      auth_user: typeof session.user === "string" ? session.user : null,
      ...fields,
      size: raw.length,
      received_at: receivedAt,
    };
    stored.push({ ...summary, raw });
    stats.messages += 1;
    return id;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const method = req.method ?? "GET";
    const path = url.pathname.replace(/\/+$/, "");

    if (path === "/api/messages") {
      if (method === "GET") {
        const to = url.searchParams.get("to")?.toLowerCase();
        const listed = to ? stored.filter((m) => m.rcpt_to.some((rcpt) => rcpt.toLowerCase() === to)) : stored;
        return sendJson(res, 200, { data: listed.map(summaryOf) });
      }
      if (method === "DELETE") {
        stored.length = 0;
        res.writeHead(204).end();
        return;
      }
      return sendError(res, 405, "method_not_allowed", "use GET or DELETE");
    }

    const messageRoute = /^\/api\/messages\/([^/]+)(\/raw)?$/.exec(path);
    if (messageRoute) {
      if (method !== "GET") return sendError(res, 405, "method_not_allowed", "use GET");
      const message = stored.find((m) => m.id === decodeURIComponent(messageRoute[1] ?? ""));
      if (!message) return sendError(res, 404, "not_found", "message not found");
      if (messageRoute[2]) {
        res.writeHead(200, { "Content-Type": "message/rfc822", "Content-Length": message.raw.length });
        res.end(message.raw);
        return;
      }
      return sendJson(res, 200, await describeMessage(message));
    }

    if (path === "/api/stats") {
      if (method === "GET") return sendJson(res, 200, stats);
      if (method === "DELETE") {
        stats = { connections: 0, messages: 0, rsets: 0 };
        res.writeHead(204).end();
        return;
      }
      return sendError(res, 405, "method_not_allowed", "use GET or DELETE");
    }

    if (path === "/api/hold") {
      if (method === "PUT") {
        if (!hold) {
          let release = () => {};
          const released = new Promise<void>((resolve) => (release = resolve));
          hold = { released, release, waiting: 0, to: url.searchParams.get("to")?.toLowerCase() ?? null };
        }
        res.writeHead(204).end();
        return;
      }
      if (method === "GET") return sendJson(res, 200, { held: hold !== null, waiting: hold?.waiting ?? 0 });
      if (method === "DELETE") {
        hold?.release();
        hold = null;
        res.writeHead(204).end();
        return;
      }
      return sendError(res, 405, "method_not_allowed", "use GET, PUT or DELETE");
    }

    if (path === "/api/rules") {
      if (method === "GET") return sendJson(res, 200, { data: rules.map(describeRule) });
      if (method === "DELETE") {
        rules = [];
        res.writeHead(204).end();
        return;
      }
      if (method === "POST") {
        let body: unknown;
        try {
          body = await readJson(req);
        } catch (error) {
          return sendError(res, 400, "invalid_json", `request body is not JSON: ${(error as Error).message}`);
        }
        const parsed = failureRuleSchema.safeParse(body);
        if (!parsed.success) {
          const errors: Record<string, string[]> = {};
          for (const issue of parsed.error.issues) {
            const field = issue.path.join(".") || "(body)";
            errors[field] = [...(errors[field] ?? []), issue.message];
          }
          return sendError(res, 422, "validation_error", "invalid rule", errors);
        }
        const times = parsed.data.times ?? 1;
        const rule: FailureRule = {
          ...parsed.data,
          id: String(nextRuleId++),
          times,
          pending: Array.from({ length: times }, () => parsed.data.responses).flat(),
        };
        rules.push(rule);
        return sendJson(res, 201, describeRule(rule));
      }
      return sendError(res, 405, "method_not_allowed", "use GET, POST or DELETE");
    }

    return sendError(res, 404, "not_found", `no route for ${method} ${url.pathname}`);
  }

  const http = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendError(res, 500, "internal_error", (error as Error).message);
      else res.destroy();
    });
  });

  return {
    async listen({ smtpPort, httpPort, host = "127.0.0.1" }) {
      const boundSmtpPort = await listenOn(smtp.server, smtpPort, host);
      try {
        return { smtpPort: boundSmtpPort, httpPort: await listenOn(http, httpPort, host) };
      } catch (error) {
        await new Promise<void>((resolve) => smtp.close(resolve));
        throw error;
      }
    },
    async close() {
      const smtpClosed = new Promise<void>((resolve) => {
        if (!smtp.server.listening) return resolve();
        smtp.close(resolve);
        // don't wait out smtp-server's grace period for idle (pooled) client connections
        for (const connection of smtp.connections) {
          connection.send(421, "Server shutting down");
          connection.close();
        }
      });
      const httpClosed = new Promise<void>((resolve, reject) => {
        if (!http.listening) return resolve();
        http.close((error) => (error ? reject(error) : resolve()));
        http.closeAllConnections();
      });
      await Promise.all([smtpClosed, httpClosed]);
    },
    messages() {
      return [...stored];
    },
  };
}
