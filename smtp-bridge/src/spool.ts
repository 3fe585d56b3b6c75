import { randomBytes } from "node:crypto";
import { open, unlink, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { SMTPServerDataStream } from "smtp-server";

// Where a message's bytes wait between DATA and the Worker's answer. A message under IO_BYTES (most mail) stays in
// memory as the chunks the socket delivered, signed and sent from them with no copy and no file. A larger one is
// written once to a file in SPOOL_DIR (unlinked as soon as it is open, so the bytes live exactly as long as the
// descriptor and a crash leaves nothing behind) and read back in chunks when the request to the Worker is signed
// and sent. A message in flight therefore costs the process at most a few hundred KiB whatever its size; what
// bounds the total is the ByteBudget, shared by all sessions (MAX_BYTES_IN_FLIGHT).

/** Bytes the bridge holds for one message, readable as many times as needed, in order. */
export interface MessageBytes {
  readonly size: number;
  chunks(): AsyncIterable<Buffer>;
}

/** The bytes all sessions may hold at once; a message that does not fit is refused, not buffered. */
export class ByteBudget {
  readonly limit: number;
  private used = 0;

  constructor(limit: number) {
    this.limit = limit;
  }

  get inUse(): number {
    return this.used;
  }

  take(bytes: number): boolean {
    if (this.used + bytes > this.limit) return false;
    this.used += bytes;
    return true;
  }

  give(bytes: number): void {
    this.used -= bytes;
  }
}

// Writes and reads go through the thread pool; batching the ~16 KiB chunks a socket delivers keeps that to a few
// dozen operations per MiB at the cost of this much memory per message being received.
const IO_BYTES = 256 * 1024;

export class SpooledMessage implements MessageBytes {
  /** Opened at the first flush: a message that never reaches IO_BYTES never touches the disk. */
  private file: FileHandle | undefined;
  private readonly dir: string;
  private readonly budget: ByteBudget;
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private written = 0;
  private reserved = 0;
  private closed = false;

  private constructor(dir: string, budget: ByteBudget, file?: FileHandle) {
    this.dir = dir;
    this.budget = budget;
    this.file = file;
  }

  /** A message with its spool file open at once: proves SPOOL_DIR can hold files (the bridge checks this at start). */
  static async create(dir: string, budget: ByteBudget): Promise<SpooledMessage> {
    return new SpooledMessage(dir, budget, await openUnlinked(dir));
  }

  /** A message kept in memory until it passes IO_BYTES, then spooled to a file in `dir`. */
  static inMemory(dir: string, budget: ByteBudget): SpooledMessage {
    return new SpooledMessage(dir, budget);
  }

  get size(): number {
    return this.written + this.pendingBytes;
  }

  /** Takes the chunk's size from the budget first: false (and nothing kept) when the budget has no room for it. */
  async append(chunk: Buffer): Promise<boolean> {
    if (!this.budget.take(chunk.length)) return false;
    this.reserved += chunk.length;
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes >= IO_BYTES) await this.flush();
    return true;
  }

  /** Writes what is held in memory to the spool file, opening it first if needed. */
  async flush(): Promise<void> {
    if (this.pendingBytes === 0) return;
    this.file ??= await openUnlinked(this.dir);
    const file = this.file;
    let buffers = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    while (buffers.length > 0) {
      const { bytesWritten } = await file.writev(buffers, this.written);
      this.written += bytesWritten;
      buffers = skipBytes(buffers, bytesWritten);
    }
  }

  /** The end of DATA: a message already on disk goes there whole; one still in memory stays there. */
  async finish(): Promise<void> {
    if (this.file) await this.flush();
  }

  async *chunks(): AsyncIterable<Buffer> {
    const file = this.file;
    for (let position = 0; file && position < this.written; ) {
      // a fresh buffer each time: a consumer (the HTTP request body) may still hold the previous one
      const { bytesRead, buffer } = await file.read(Buffer.allocUnsafe(Math.min(IO_BYTES, this.written - position)), 0, undefined, position);
      if (bytesRead === 0) throw new Error("the spool file ended early");
      position += bytesRead;
      yield buffer.subarray(0, bytesRead);
    }
    // the received chunks themselves: smtp-server hands each one over as its own buffer, never reused
    yield* this.pending;
  }

  /** Frees the file and gives the bytes back to the budget; safe to call more than once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.budget.give(this.reserved);
    this.reserved = 0;
    this.pending = [];
    this.pendingBytes = 0;
    await this.file?.close();
  }
}

async function openUnlinked(dir: string): Promise<FileHandle> {
  const path = join(dir, `mailforge-bridge-${randomBytes(12).toString("hex")}`);
  const file = await open(path, "wx+", 0o600);
  try {
    await unlink(path);
  } catch (error) {
    await file.close();
    throw error;
  }
  return file;
}

function skipBytes(buffers: Buffer[], count: number): Buffer[] {
  let left = count;
  const rest: Buffer[] = [];
  for (const buffer of buffers) {
    if (left >= buffer.length) left -= buffer.length;
    else {
      rest.push(left > 0 ? buffer.subarray(left) : buffer);
      left = 0;
    }
  }
  return rest;
}

/** How much of the start of a message is kept in memory for the header check: the header section, at most. */
const HEAD_WINDOW_BYTES = 256 * 1024;

type ReceivedData =
  | { outcome: "kept"; bytes: number; message: SpooledMessage; head: Buffer }
  | { outcome: "too_big"; bytes: number }
  | { outcome: "no_room"; bytes: number; reason: string };

/**
 * Reads DATA to its end into a spool file. Past `maxBytes`, when the budget is used up, or when the disk refuses a
 * write, the rest is drained and not kept: smtp-server waits for the stream's end before it sends the reply.
 */
export async function spoolData(stream: SMTPServerDataStream, options: { dir: string; budget: ByteBudget; maxBytes: number }): Promise<ReceivedData> {
  let message: SpooledMessage | undefined;
  let bytes = 0;
  let refusal: { outcome: "too_big" } | { outcome: "no_room"; reason: string } | undefined;
  const head: Buffer[] = [];
  let headBytes = 0;
  const drop = async (why: NonNullable<typeof refusal>) => {
    refusal = why;
    await message?.close();
    message = undefined;
  };

  try {
    message = SpooledMessage.inMemory(options.dir, options.budget);
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (!message) continue;
      if (bytes > options.maxBytes) {
        await drop({ outcome: "too_big" });
        continue;
      }
      if (headBytes < HEAD_WINDOW_BYTES) {
        const part = chunk.subarray(0, HEAD_WINDOW_BYTES - headBytes);
        head.push(part);
        headBytes += part.length;
      }
      try {
        if (!(await message.append(chunk))) {
          await drop({ outcome: "no_room", reason: `${options.budget.limit} bytes in flight (MAX_BYTES_IN_FLIGHT) reached` });
        }
      } catch (error) {
        // ENOSPC and the like: the same answer as a full budget, the client keeps the message and retries
        await drop({ outcome: "no_room", reason: `spool: ${(error as Error).message}` });
      }
    }
  } catch (error) {
    // the client went away mid-DATA: nothing to answer, nothing kept
    await message?.close();
    throw error;
  }
  if (stream.sizeExceeded || bytes > options.maxBytes) await drop({ outcome: "too_big" });
  if (message) {
    try {
      await message.finish();
      return { outcome: "kept", bytes, message, head: headerSection(Buffer.concat(head, headBytes)) };
    } catch (error) {
      await drop({ outcome: "no_room", reason: `spool: ${(error as Error).message}` });
    }
  }
  return refusal?.outcome === "no_room" ? { outcome: "no_room", bytes, reason: refusal.reason } : { outcome: "too_big", bytes };
}

/** The header section and the empty line after it, or all of `start` when it holds no empty line. */
function headerSection(start: Buffer): Buffer {
  const lf = start.indexOf("\n\n");
  const crlf = start.indexOf("\n\r\n");
  const ends = [lf === -1 ? -1 : lf + 2, crlf === -1 ? -1 : crlf + 3].filter((end) => end > 0);
  return ends.length === 0 ? start : start.subarray(0, Math.min(...ends));
}
