// Domain typo suggestions against the providers most mistyped in sign-up forms. A suggestion is advice for
// the person typing: it never changes the status, because lookalike domains are often real companies.

/** Ordered by how common the provider is, so ties go to the likelier one. */
const TOP_PROVIDERS = [
  "gmail.com",
  "yahoo.com",
  "hotmail.com",
  "outlook.com",
  "icloud.com",
  "aol.com",
  "live.com",
  "msn.com",
  "me.com",
  "mac.com",
  "googlemail.com",
  "ymail.com",
  "rocketmail.com",
  "protonmail.com",
  "proton.me",
  "gmx.com",
  "gmx.de",
  "gmx.net",
  "web.de",
  "t-online.de",
  "yandex.ru",
  "yandex.com",
  "mail.ru",
  "zoho.com",
  "comcast.net",
  "verizon.net",
  "att.net",
  "sbcglobal.net",
  "bellsouth.net",
  "yahoo.co.uk",
  "hotmail.co.uk",
  "btinternet.com",
  "yahoo.fr",
  "hotmail.fr",
  "orange.fr",
  "wanadoo.fr",
  "libero.it",
  "bigpond.com",
  "qq.com",
  "163.com",
];
const topProviders: ReadonlySet<string> = new Set(TOP_PROVIDERS);

// Providers whose first label is this short match too many real domains by one edit (aon.com, love.com).
const MIN_FUZZY_LABEL = 5;
// Real providers one edit away from a top provider.
const LOOKALIKE_PROVIDERS: ReadonlySet<string> = new Set(["mail.com", "email.com", "cloud.com", "wahoo.com"]);

/** Mistyped TLDs that are not themselves delegated TLDs (.co, .cm and .om are, so they stay out). */
const TLD_TYPOS: Readonly<Record<string, string>> = {
  con: "com",
  cmo: "com",
  ocm: "com",
  vom: "com",
  xom: "com",
  cpm: "com",
  cim: "com",
  comm: "com",
  coom: "com",
  conm: "com",
  nte: "net",
  nett: "net",
  ogr: "org",
  orgg: "org",
  rog: "org",
};

const fuzzyTargets = TOP_PROVIDERS.map((domain) => {
  const dot = domain.indexOf(".");
  return { domain, label: domain.slice(0, dot), suffix: domain.slice(dot + 1) };
}).filter((p) => p.label.length >= MIN_FUZZY_LABEL);

/**
 * The domain the user probably meant, or null: `gmial.com` → `gmail.com`, `yahoo.cm` → `yahoo.com`,
 * `acme.con` → `acme.com`. Expects a lower-cased ASCII domain.
 */
export function suggestDomain(domain: string, isKnownProvider: (domain: string) => boolean = () => false): string | null {
  if (topProviders.has(domain) || LOOKALIKE_PROVIDERS.has(domain)) return null;
  const labels = domain.split(".");
  const tld = labels[labels.length - 1] ?? "";
  const fixedTld = TLD_TYPOS[tld];
  const candidate = fixedTld ? [...labels.slice(0, -1), fixedTld].join(".") : domain;
  if (topProviders.has(candidate)) return candidate;

  const dot = candidate.indexOf(".");
  const label = candidate.slice(0, dot);
  const suffix = candidate.slice(dot + 1);
  let best: { domain: string; distance: number } | null = null;
  for (const target of fuzzyTargets) {
    // First label mistyped, suffix right: gmial.com, hotmial.co.uk.
    if (suffix === target.suffix) {
      const maxDistance = target.label.length >= 7 ? 2 : 1;
      const distance = editDistance(label, target.label, maxDistance);
      if (distance <= maxDistance && (!best || distance < best.distance)) best = { domain: target.domain, distance };
    }
    // First label right, suffix one edit off: gmail.co, yahoo.cm. Regional providers (hotmail.co) are real.
    if (label === target.label && !isKnownProvider(candidate) && editDistance(suffix, target.suffix, 1) <= 1) {
      if (!best || 1 < best.distance) best = { domain: target.domain, distance: 1 };
    }
  }
  if (best) return best.domain;
  return fixedTld ? candidate : null;
}

/**
 * Optimal-string-alignment distance (Levenshtein plus adjacent transposition, the commonest typing slip).
 * Returns max + 1 as soon as the answer is known to exceed `max`.
 */
export function editDistance(a: string, b: string, max = Number.POSITIVE_INFINITY): number {
  if (Math.abs(a.length - b.length) > max) return max + 1;
  // Three rolling rows in preallocated buffers: this runs for ~15 providers per address in bulk jobs.
  const width = b.length + 1;
  if (rows.length < width * 3) rows = new Uint16Array(width * 3);
  let prevPrev = 0;
  let prev = width;
  let row = 2 * width;
  for (let j = 0; j < width; j++) rows[prev + j] = j;
  for (let i = 1; i <= a.length; i++) {
    rows[row] = i;
    let rowMin = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(rows[prev + j]! + 1, rows[row + j - 1]! + 1, rows[prev + j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) value = Math.min(value, rows[prevPrev + j - 2]! + 1);
      rows[row + j] = value;
      if (value < rowMin) rowMin = value;
    }
    if (rowMin > max) return max + 1;
    [prevPrev, prev, row] = [prev, row, prevPrev];
  }
  const distance = rows[prev + b.length]!;
  return distance > max ? max + 1 : distance;
}

// Scratch space for editDistance (no state between calls: every call overwrites what it reads).
let rows = new Uint16Array(3 * 64);
