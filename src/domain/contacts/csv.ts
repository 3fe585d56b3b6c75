// RFC 4180 CSV read straight from bytes. Working on bytes (not decoded text) gives the exact byte offset where
// each record ends, so an import can stop after any record and resume later with an R2 range read from that
// offset: the file is never held whole in memory by the consumer. Splitting on ASCII bytes is safe in UTF-8,
// where no byte of a multi-byte character is below 0x80.
//
// Lenient where spreadsheets are sloppy: CRLF, LF or lone CR line breaks; a UTF-8 BOM; a quote inside an
// unquoted field is kept as text; text after a closing quote is appended; blank lines are skipped; a row may
// have fewer or more fields than the header (the caller decides). Invalid UTF-8 decodes to U+FFFD.

const QUOTE = 0x22;
const CR = 0x0d;
const LF = 0x0a;
const COMMA = 0x2c;
const SEMICOLON = 0x3b;
const TAB = 0x09;

export type CsvRecord = {
  fields: string[];
  /** Byte offset just past the record and its line break: where the next record starts. */
  end: number;
  /** The input ended inside a quoted field: the record swallowed the rest of the file. */
  unterminatedQuote: boolean;
};

export type CsvWindow = {
  /** Where to start, a record boundary (0, or a previous record's `end`). */
  start: number;
  delimiter: number;
  /**
   * Whether `bytes` runs to the end of the file. When false, a record cut by the end of the window is not
   * returned; the next window starts at the last returned record's `end`.
   */
  atEnd: boolean;
};

const decoder = new TextDecoder();

/** Length of a UTF-8 byte order mark at the start of the file (0 or 3). */
export function bomLength(bytes: Uint8Array): number {
  return bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
}

/**
 * The delimiter of a file, guessed from its first line: whichever of `,` `;` and tab appears most often outside
 * quotes (spreadsheets in many locales export `;`). Comma when none appears.
 */
export function detectDelimiter(bytes: Uint8Array, start: number): number {
  const counts = new Map<number, number>([
    [COMMA, 0],
    [SEMICOLON, 0],
    [TAB, 0],
  ]);
  let quoted = false;
  for (let i = start; i < bytes.length; i++) {
    const byte = bytes[i]!;
    if (byte === QUOTE) quoted = !quoted;
    else if (!quoted && (byte === LF || byte === CR)) break;
    else if (!quoted && counts.has(byte)) counts.set(byte, counts.get(byte)! + 1);
  }
  let best = COMMA;
  for (const [delimiter, count] of counts) if (count > counts.get(best)!) best = delimiter;
  return best;
}

/** The complete records in a window of a CSV file, in order, blank lines skipped. */
export function* csvRecords(bytes: Uint8Array, window: CsvWindow): Generator<CsvRecord> {
  const { delimiter, atEnd } = window;
  const n = bytes.length;
  const isFieldEnd = (byte: number) => byte === delimiter || byte === CR || byte === LF;
  let pos = window.start;

  while (pos < n) {
    const fields: string[] = [];
    let unterminatedQuote = false;
    let i = pos;
    for (;;) {
      let value: string;
      if (i < n && bytes[i] === QUOTE) {
        let j = i + 1;
        let escapes = false;
        for (;;) {
          if (j >= n) {
            if (!atEnd) return;
            unterminatedQuote = true;
            break;
          }
          if (bytes[j] === QUOTE) {
            // A quote as the last byte of a window may be the first half of an escaped `""`.
            if (j + 1 >= n && !atEnd) return;
            if (bytes[j + 1] === QUOTE) {
              escapes = true;
              j += 2;
              continue;
            }
            break;
          }
          j++;
        }
        value = decoder.decode(bytes.subarray(i + 1, j));
        if (escapes) value = value.replaceAll('""', '"');
        i = Math.min(j + 1, n);
        let k = i;
        while (k < n && !isFieldEnd(bytes[k]!)) k++;
        if (k > i) value += decoder.decode(bytes.subarray(i, k));
        i = k;
      } else {
        let k = i;
        while (k < n && !isFieldEnd(bytes[k]!)) k++;
        value = decoder.decode(bytes.subarray(i, k));
        i = k;
      }
      fields.push(value);

      if (i >= n) {
        // The file's last record may lack a line break; a window's may just be cut.
        if (!atEnd) return;
        break;
      }
      const byte = bytes[i]!;
      if (byte === delimiter) {
        i++;
        continue;
      }
      if (byte === CR) {
        if (i + 1 >= n && !atEnd) return;
        i += bytes[i + 1] === LF ? 2 : 1;
      } else {
        i++;
      }
      break;
    }
    pos = i;
    if (fields.length === 1 && fields[0]!.trim() === "") continue;
    yield { fields, end: pos, unterminatedQuote };
  }
}
