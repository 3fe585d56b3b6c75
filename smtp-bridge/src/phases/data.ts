import PostalMime from "postal-mime";
import type { SMTPServerDataStream, SMTPServerOptions, SMTPServerSession } from "smtp-server";
import type { LogFields } from "../log.ts";
import { replies, replyForRefusal, type SmtpReplyError } from "../replies.ts";
import { describeReply, hangUp, logTransaction, relayUserOf, type BridgeContext } from "../session.ts";
import { spoolData, type SpooledMessage } from "../spool.ts";
import { WorkerUnavailableError } from "../worker-client.ts";

// DATA: size and the bytes-in-flight cap, spooled to disk (spool.ts), the header section parsed as a sanity check,
// then the exact bytes go to the Worker; 250 only after its 202.

/** What the client hears at the end of DATA, and what the transaction log says about it. */
interface DataOutcome {
  reply: SmtpReplyError | null;
  message?: string;
  fields: LogFields;
}

const refused = (reply: SmtpReplyError, fields: LogFields = {}): DataOutcome => ({
  reply,
  fields: { outcome: reply.responseCode >= 500 ? "rejected" : "deferred", reply: describeReply(reply), ...fields },
});

/**
 * Why the header section cannot be a message, if it cannot. postal-mime is lenient by design; what it cannot turn
 * into headers with a From is refused here rather than after a round trip to the Worker (which parses it whole).
 */
async function headerProblem(head: Buffer): Promise<string | undefined> {
  try {
    const email = await PostalMime.parse(head);
    if (email.headers.length === 0) return "no header section";
    if (!email.headers.some((header) => header.key === "from")) return "no From header";
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

async function submit(context: BridgeContext, raw: SpooledMessage, session: SMTPServerSession): Promise<DataOutcome> {
  const user = relayUserOf(session);
  const mailFrom = session.envelope.mailFrom;
  if (!user || !mailFrom) return refused(replies.credentialRevoked());
  try {
    const result = await context.worker.submitMessage({
      credentialId: user.credentialId,
      mailFrom: mailFrom.address,
      rcptTo: session.envelope.rcptTo.map((rcpt) => rcpt.address),
      raw,
    });
    if (!result.ok) {
      return refused(replyForRefusal(result.refusal), { worker_status: result.refusal.status, error_code: result.refusal.code });
    }
    const { id, creditsCharged, replayed } = result.value;
    const message = `2.0.0 Ok: queued as ${id}`;
    // A replayed answer is the first acceptance's: its credits were charged then, not by this transaction.
    const fields = { outcome: "queued", reply: `250 ${message}`, message_id: id, credits_charged: replayed ? 0 : creditsCharged, replayed };
    return { reply: null, message, fields };
  } catch (error) {
    if (!(error instanceof WorkerUnavailableError)) throw error;
    return refused(replies.workerUnavailable(), { error: error.message });
  }
}

async function receive(context: BridgeContext, stream: SMTPServerDataStream, session: SMTPServerSession): Promise<DataOutcome> {
  const { config } = context;
  const received = await spoolData(stream, { dir: config.spoolDir, budget: context.inFlight, maxBytes: config.maxMessageBytes });
  let outcome: DataOutcome;
  if (received.outcome === "too_big") outcome = refused(replies.tooBig(config.maxMessageBytes));
  else if (received.outcome === "no_room") outcome = refused(replies.noRoom(), { error: received.reason });
  else {
    try {
      const problem = await headerProblem(received.head);
      outcome = problem ? refused(replies.unparseable(problem)) : await submit(context, received.message, session);
    } finally {
      await received.message.close();
    }
  }
  return { ...outcome, fields: { ...outcome.fields, bytes: received.bytes } };
}

export function dataHandler(context: BridgeContext): NonNullable<SMTPServerOptions["onData"]> {
  return (stream, session, callback) => {
    const state = context.sessions.get(session.id);
    if (state) state.inData = true;
    const finish = (reply: SmtpReplyError | null, message: string | undefined, fields: LogFields) => {
      logTransaction(context, session, state, { phase: "data", ...fields });
      if (reply) callback(reply);
      else callback(null, message);
      if (state) {
        state.inData = false;
        // the reply goes out first; a draining bridge then ends the session instead of taking another message
        if (context.shuttingDown) setImmediate(() => hangUp(state));
      }
    };

    receive(context, stream, session).then(
      ({ reply, message, fields }) => finish(reply, message, fields),
      (error: unknown) => {
        // the client went away mid-DATA (or the stream broke): nothing to answer, nothing was accepted
        finish(replies.workerUnavailable(), undefined, { outcome: "aborted", error: (error as Error).message });
      },
    );
  };
}
