import { describe, expect, it } from "vitest";
import { bomLength, csvRecords, detectDelimiter } from "../../src/domain/contacts/csv";

const bytes = (text: string) => new TextEncoder().encode(text);
const COMMA = 0x2c;

function parse(text: string, atEnd = true) {
  const input = bytes(text);
  return [...csvRecords(input, { start: bomLength(input), delimiter: detectDelimiter(input, bomLength(input)), atEnd })];
}

describe("the CSV reader", () => {
  it("reads quoted fields with delimiters, doubled quotes and line breaks, CRLF and a BOM", () => {
    const records = parse('\uFEFFemail,name\r\n"a@x.com","Doe, ""JD"" Jane"\r\nb@x.com,"two\r\nlines"\r\n');
    expect(records.map((record) => record.fields)).toEqual([
      ["email", "name"],
      ["a@x.com", 'Doe, "JD" Jane'],
      ["b@x.com", "two\r\nlines"],
    ]);
    expect(records.at(-1)?.end).toBe(bytes('\uFEFFemail,name\r\n"a@x.com","Doe, ""JD"" Jane"\r\nb@x.com,"two\r\nlines"\r\n').length);
  });

  it("skips blank lines, reads a last line without a break, and keeps short and long rows as they are", () => {
    expect(parse("email\n\na@x.com\n  \nb@x.com,extra\nc@x.com").map((record) => record.fields)).toEqual([
      ["email"],
      ["a@x.com"],
      ["b@x.com", "extra"],
      ["c@x.com"],
    ]);
    expect(parse("a,b,\n").map((record) => record.fields)).toEqual([["a", "b", ""]]);
    expect(parse("a\rb\r").map((record) => record.fields)).toEqual([["a"], ["b"]]);
  });

  it("is lenient with stray quotes and flags a quote that never closes", () => {
    expect(parse('a,b"c,"d"e\n').map((record) => record.fields)).toEqual([["a", 'b"c', "de"]]);
    const [record] = parse('x,"never closed\nmore');
    expect(record).toMatchObject({ fields: ["x", "never closed\nmore"], unterminatedQuote: true });
  });

  it("detects semicolon and tab delimiters from the header, ignoring quoted ones", () => {
    expect(detectDelimiter(bytes("email;first;last\na;b;c"), 0)).toBe(0x3b);
    expect(detectDelimiter(bytes("email\tfirst\n"), 0)).toBe(0x09);
    expect(detectDelimiter(bytes('"a;b;c",d\n'), 0)).toBe(COMMA);
    expect(detectDelimiter(bytes("email\n"), 0)).toBe(COMMA);
  });

  it("in a window, stops before a record cut by the window's end, so the next window resumes at a record boundary", () => {
    const text = 'email,note\na@x.com,"multi\nline"\nb@x.com,"é, ü"\nc@x.com,last\n';
    const all = bytes(text);
    const expected = parse(text).map((record) => record.fields);
    // Every cut point: read a window, resume from the last complete record's end.
    for (let cut = 1; cut < all.length; cut++) {
      const fields: string[][] = [];
      let offset = 0;
      let windowSize = cut;
      while (offset < all.length) {
        const end = Math.min(all.length, offset + windowSize);
        const window = all.subarray(offset, end);
        const records = [...csvRecords(window, { start: 0, delimiter: COMMA, atEnd: end === all.length })];
        if (records.length === 0) {
          windowSize *= 2;
          continue;
        }
        fields.push(...records.map((record) => record.fields));
        offset += records.at(-1)!.end;
        if (end === all.length) break;
      }
      expect(fields, `cut at ${cut}`).toEqual(expected);
    }
  });
});
