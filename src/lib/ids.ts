const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** Uniform random base62 string (rejection sampling, so secrets built from it carry their full entropy). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (byte < 248 && out.length < length) out += alphabet[byte % 62];
    }
  }
  return out;
}

export type IdPrefix =
  | "acc"
  | "key"
  | "led"
  | "dom"
  | "tpl"
  | "msg"
  | "evt"
  | "smtp"
  | "wh"
  | "whd"
  | "vjob"
  | "con"
  | "lst"
  | "imp"
  | "req"
  | "cmp"
  | "snd"
  | "seg"
  | "air"
  | "aut"
  | "run"
  | "inb"
  | "top"
  | "frm"
  | "mem"
  | "aud";

export const newId = (prefix: IdPrefix) => `${prefix}_${randomBase62(22)}`;

/** An id of newId's shape derived from a digest (at least 22 bytes), for rows a retried producer must write once. */
export const idFromDigest = (prefix: IdPrefix, digest: Uint8Array) =>
  `${prefix}_${Array.from(digest.subarray(0, 22), (byte) => alphabet[byte % 62]).join("")}`;

export const nowIso = () => new Date().toISOString();
