// Edits to a message's top-level header block that keep every other byte as received: a relayed message is stored
// as sent and DKIM-signed later over exactly those bytes, so re-serialising it through a MIME library is not an option.

const LF = 0x0a;
const CR = 0x0d;
const SP = 0x20;
const HTAB = 0x09;
const COLON = 0x3a;
// Longer than any registered field name; a line whose colon comes later is not one of the names asked for.
const maxFieldNameLength = 76;

function fieldName(line: Uint8Array): string {
  const colon = line.subarray(0, maxFieldNameLength + 1).indexOf(COLON);
  if (colon < 0) return "";
  let end = colon;
  // obsolete syntax (RFC 5322 §4.5) allows white space before the colon, and postal-mime reads it that way too
  while (end > 0 && (line[end - 1] === SP || line[end - 1] === HTAB)) end--;
  return String.fromCharCode(...line.subarray(0, end)).toLowerCase();
}

const isEmptyLine = (line: Uint8Array) => (line.length === 1 && line[0] === LF) || (line.length === 2 && line[0] === CR && line[1] === LF);

/**
 * `raw` without the top-level header fields called `names` (lower case), each with its folded continuation lines.
 * The header block ends at the first empty line (RFC 5322 §2.1); a line starting with a space or tab continues the
 * field above it (§2.2.3). Returns `raw` itself when there is nothing to remove.
 */
export function withoutHeaderFields(raw: Uint8Array, names: ReadonlySet<string>): Uint8Array {
  const kept: Uint8Array[] = [];
  let keptFrom = 0;
  let dropping = false;
  let position = 0;
  while (position < raw.length) {
    const lineFeed = raw.indexOf(LF, position);
    const end = lineFeed < 0 ? raw.length : lineFeed + 1;
    const line = raw.subarray(position, end);
    if (isEmptyLine(line)) break;
    if (line[0] !== SP && line[0] !== HTAB) {
      const drop = names.has(fieldName(line));
      if (drop && !dropping) kept.push(raw.subarray(keptFrom, position));
      if (!drop && dropping) keptFrom = position;
      dropping = drop;
    }
    position = end;
  }
  if (kept.length === 0) return raw;
  kept.push(raw.subarray(dropping ? position : keptFrom));
  const out = new Uint8Array(kept.reduce((total, part) => total + part.length, 0));
  let offset = 0;
  for (const part of kept) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** The top-level header block and the empty line after it (all of `raw` when there is no empty line), without copying. */
export function headerBlock(raw: Uint8Array): Uint8Array {
  for (let position = 0; position < raw.length; ) {
    const lineFeed = raw.indexOf(LF, position);
    if (lineFeed < 0) break;
    const line = raw.subarray(position, lineFeed + 1);
    position = lineFeed + 1;
    if (isEmptyLine(line)) return raw.subarray(0, position);
  }
  return raw;
}
