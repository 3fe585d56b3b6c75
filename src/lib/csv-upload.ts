import { base64ToBytes } from "./crypto";

/**
 * Uploaded CSV files arrive as `data:<type>[;name=<file>];base64,<content>` (the verification API's bulk upload,
 * the contacts import). Both surfaces read them here so they accept and refuse the same files with the same reasons.
 */
export type DecodedDataUri = { mediaType: string; name: string | undefined; bytes: Uint8Array };

export class UploadError extends Error {
  override name = "UploadError";
}

const base64Content = /^[A-Za-z0-9+/]*={0,2}$/;

export function decodeBase64DataUri(file: string): DecodedDataUri {
  const match = /^data:([^,]*),/i.exec(file.slice(0, 2048));
  if (!match) throw new UploadError("not a data URI; send data:text/csv;base64,<content>");
  const [mediaType = "", ...parameters] = match[1]!.split(";").map((part) => part.trim());
  if (!parameters.some((parameter) => parameter.toLowerCase() === "base64")) {
    throw new UploadError("the data URI is not base64-encoded; send data:text/csv;base64,<content>");
  }
  const content = file.slice(match[0].length).replace(/\s+/g, "");
  if (content.length % 4 !== 0 || !base64Content.test(content)) throw new UploadError("the content is not valid base64");
  const rawName = parameters
    .find((parameter) => /^name=/i.test(parameter))
    ?.slice("name=".length)
    .replace(/^"(.*)"$/, "$1");
  let name = rawName;
  if (rawName) {
    try {
      name = decodeURIComponent(rawName);
    } catch {
      // a stray % is kept as written
    }
  }
  return { mediaType: mediaType.toLowerCase(), name, bytes: base64ToBytes(content) };
}

/** Why bytes are not CSV text we can read (a workbook, binary, not UTF-8), or undefined. */
export function csvBytesProblem(bytes: Uint8Array): string | undefined {
  if (bytes[0] === 0x50 && bytes[1] === 0x4b && bytes[2] === 0x03 && bytes[3] === 0x04) {
    return "not CSV: this is a ZIP archive (an .xlsx workbook?); export the sheet as CSV";
  }
  if (bytes.includes(0)) return "not CSV: the content is binary";
  try {
    // Refused rather than read with replacement characters in names and addresses.
    new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
  } catch {
    return 'not CSV: the content is not UTF-8 text; export it as "CSV UTF-8"';
  }
  return undefined;
}
