// Email verification benchmarks, side by side in one run:
//   (a) a bulk job of 50,000 addresses (about 2,000 domains, 5% duplicates, 2% bad syntax) through a running local
//       stack: acceptance latency, wall time until `completed`, and the DoH queries the dev DoH server counted
//       (GET /stats) against distinct domains × record types (MX, A, AAAA);
//   (b) single-address engine throughput without DNS (a resolver that answers at once) next to two npm validators on
//       the same inputs: deep-email-validator with its network checks off (the like-for-like peer), email-validator
//       (syntax only) and mailchecker (syntax + disposable list).
//
// Start a stack on ports of your own first (the DoH server answers from .dev/zone.json; this script publishes its
// domains there over HTTP and removes them afterwards):
//   WORKER_PORT=48787 DOH_PORT=48053 SINK_SMTP_PORT=41025 SINK_HTTP_PORT=48025 npm run dev &
// Run:
//   WORKER_URL=http://127.0.0.1:48787 DOH_ADMIN_URL=http://127.0.0.1:48053 npx tsx scripts/bench/verification.ts [addresses=50000] [domains=2000]
//   npx tsx scripts/bench/verification.ts --engine-only          (part b alone, no stack)
// Domain names carry a random label per run, so the D1 dns_cache an earlier run left in .dev/state cannot make the
// query count look better than it is.
import { cpuUsage } from "node:process";
import { validate as deepValidate } from "deep-email-validator";
import * as emailValidator from "email-validator";
import mailchecker from "mailchecker";
import { readDevVars } from "../lib/dev-vars.ts";

const engineOnly = process.argv.includes("--engine-only");
const jobOnly = process.argv.includes("--job-only");
const [addressArg, domainArg] = process.argv.slice(2).filter((arg) => !arg.startsWith("--"));
const addressCount = Number(addressArg ?? 50_000);
const domainCount = Number(domainArg ?? 2_000);
const workerUrl = process.env.WORKER_URL ?? "http://127.0.0.1:8787";
const dohAdminUrl = process.env.DOH_ADMIN_URL ?? "http://127.0.0.1:8053";

const out = (line = "") => process.stdout.write(`${line}\n`);

// --- the engine, loaded untyped: its sources are typed for the Workers runtime (bundler resolution), not Node -------

type EngineResult = { status: string; result: string; syntax_valid: boolean; disposable: boolean };
type DnsAnswerStub = { status: "ok"; records: unknown[]; ttl: number };
type Resolver = {
  resolve(name: string, type: string): Promise<DnsAnswerStub>;
  lookupMany(queries: readonly { name: string; type: string }[]): Promise<DnsAnswerStub[]>;
};
type Engine = {
  verifyEmail(email: string, deps: { resolver: Resolver }): Promise<EngineResult>;
  checkSyntax(email: string): { valid: boolean; domain: string };
};
const enginePath = "../../src/domain/verification/index.ts";

/** Every domain has one MX, answered without I/O: what is left is the engine's own work. */
const instantResolver: Resolver = {
  async resolve(name, type) {
    return { status: "ok", records: type === "MX" ? [{ priority: 10, exchange: `mx.${name}` }] : [], ttl: 300 };
  },
  async lookupMany(queries) {
    return Promise.all(queries.map((query) => instantResolver.resolve(query.name, query.type)));
  },
};

// --- inputs --------------------------------------------------------------------------------------------------------

/** Deterministic pseudo-random numbers, so two runs verify the same addresses. */
function random(seed: number) {
  let state = seed >>> 0;
  return () => {
    state = (state * 1_664_525 + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

function shuffle<T>(items: T[], next: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(next() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

const firstNames = ["jane", "john", "ana", "li", "omar", "sofia", "max", "eva", "raj", "mia", "admin", "info", "José", "o'neil"];
const realDomains = [
  "gmail.com",
  "yahoo.com",
  "outlook.com",
  "hotmail.co.uk",
  "mailinator.com",
  "gmial.com",
  "yaho.com",
  "acme.io",
  "example.org",
  "xn--bcher-kva.de",
];
/** The i-th of many distinct addresses that fail checkSyntax, in ten shapes. */
const badAddress = (i: number) =>
  [
    `plainaddress${i}`,
    `@no-local${i}.com`,
    `two${i}@@ats.com`,
    `trailing.dot${i}.@x.com`,
    `space ${i}@x.com`,
    `a${i}@b`,
    `a${i}@-b.com`,
    `a${i}@b..com`,
    `"quoted${i}"@x.com`,
    `a${i}@[10.0.0.1]`,
  ][i % 10]!;

/** Mixed, realistic-looking addresses for part (b): providers, typos, disposable, role, IDN, UTF-8, bad syntax. */
function engineInputs(count: number): string[] {
  const next = random(7);
  return Array.from({ length: count }, (_, i) => {
    if (i % 20 === 0) return badAddress(i / 20);
    const name = firstNames[Math.floor(next() * firstNames.length)]!;
    const domain = i % 3 === 0 ? realDomains[Math.floor(next() * realDomains.length)]! : `company${Math.floor(next() * 5000)}.com`;
    return `${name}.${i}@${domain}`;
  });
}

/** Part (a): 93% unique addresses over `domains` domains, 5% duplicates (case changed), 2% bad syntax, shuffled. */
function jobInputs(count: number, domains: number, suffix: string, missing: Set<number>) {
  const next = random(42);
  const domainName = (d: number) => (missing.has(d) ? `d${d}.nx-${suffix}` : `d${d}.${suffix}`);
  const unique = Math.round(count * 0.93);
  const emails: string[] = [];
  for (let i = 0; i < unique; i++) emails.push(`${firstNames[i % firstNames.length]!.replace(/[^a-z]/gi, "")}${i}@${domainName(i % domains)}`);
  const duplicates = Math.round(count * 0.05);
  for (let i = 0; i < duplicates; i++) emails.push(emails[Math.floor(next() * unique)]!.toUpperCase());
  for (let i = 0; emails.length < count; i++) emails.push(badAddress(i));
  return { emails: shuffle(emails, next), domainName };
}

// --- (a) the bulk job through the stack ------------------------------------------------------------------------------

async function request<T>(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: T }> {
  const response = await fetch(url, {
    method,
    headers: { ...(body === undefined ? {} : { "Content-Type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: (text ? JSON.parse(text) : undefined) as T };
}

type Job = { id: string; status: string; total: number; processed: number; counts: Record<string, number>; credits_charged: number };

async function bulkJob() {
  const adminToken = process.env.ADMIN_TOKEN ?? readDevVars().ADMIN_TOKEN;
  if (!adminToken) throw new Error("no ADMIN_TOKEN (set it, or run from the repository root where .dev.vars is)");
  const run = Math.random().toString(36).slice(2, 8);
  const suffix = `b${run}.bench-verify.test`;
  // 2.5% of the domains have only an A record (implicit MX: MX, A and AAAA asked), 2.5% do not exist (NXDOMAIN).
  const implicit = new Set(Array.from({ length: Math.round(domainCount * 0.025) }, (_, i) => i * 40 + 1));
  const missing = new Set(Array.from({ length: Math.round(domainCount * 0.025) }, (_, i) => i * 40 + 2));
  const { emails, domainName } = jobInputs(addressCount, domainCount, suffix, missing);

  const published = [`*.${suffix}`, ...[...implicit].map(domainName)];
  const put = (name: string, records: unknown) => request("PUT", `${dohAdminUrl}/zone/${encodeURIComponent(name)}`, records);
  await put(`*.${suffix}`, { MX: [{ priority: 10, exchange: `mx.${suffix}` }] });
  for (const d of implicit) await put(domainName(d), { A: ["192.0.2.10"] });

  try {
    const account = await request<{ api_key: string }>(
      "POST",
      `${workerUrl}/admin/v1/accounts`,
      {
        name: "Verification bench",
        plan: "enterprise",
        verify_credits: addressCount * 2,
        rate_limit_per_minute: 1_000_000,
      },
      { Authorization: `Bearer ${adminToken}` },
    );
    if (account.status !== 201) throw new Error(`account creation failed: ${account.status} ${JSON.stringify(account.body)}`);
    const auth = { Authorization: `Bearer ${account.body.api_key}` };

    const engine = (await import(enginePath)) as Engine;
    const distinctDomains = new Set(
      emails.flatMap((email) => {
        const syntax = engine.checkSyntax(email);
        return syntax.valid ? [syntax.domain] : [];
      }),
    );
    const started = performance.now();
    const accepted = await request<{ id: string; credits_charged: number }>("POST", `${workerUrl}/api/v1/verify`, { emails }, auth);
    const acceptedMs = performance.now() - started;
    if (accepted.status !== 202) throw new Error(`job refused: ${accepted.status} ${JSON.stringify(accepted.body)}`);

    let job: Job;
    for (;;) {
      job = (await request<Job>("GET", `${workerUrl}/api/v1/verify/${accepted.body.id}?limit=1`, undefined, auth)).body;
      if (job.status === "completed" || job.status === "failed") break;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const wallMs = performance.now() - started;

    const csvStarted = performance.now();
    const csv = await fetch(`${workerUrl}/api/v1/verify/${accepted.body.id}?format=csv`, { headers: auth });
    const csvText = await csv.text();
    const csvMs = performance.now() - csvStarted;

    const stats = (await request<{ byName: Record<string, number> }>("GET", `${dohAdminUrl}/stats`)).body.byName;
    const ours = Object.entries(stats).filter(([key]) => key.split("/")[0]!.endsWith(suffix));
    const byType: Record<string, number> = {};
    for (const [key, n] of ours) byType[key.split("/")[1]!] = (byType[key.split("/")[1]!] ?? 0) + n;
    const queries = ours.reduce((sum, [, n]) => sum + n, 0);
    const asked = new Set(ours.map(([key]) => key.split("/")[0]));
    // What a perfect resolver would ask: one MX per domain, plus A and AAAA for the domains without MX.
    const necessary = asked.size + 2 * [...implicit].length;

    out(`(a) bulk job through ${workerUrl}: ${emails.length} addresses, ${distinctDomains.size} distinct domains`);
    out(
      `    accepted (202) in ${acceptedMs.toFixed(0)} ms; completed in ${(wallMs / 1000).toFixed(1)} s wall ` +
        `(${Math.round(emails.length / (wallMs / 1000))} addresses/s); status ${job.status}`,
    );
    out(`    total ${job.total}, processed ${job.processed}, credits charged ${job.credits_charged}, counts ${JSON.stringify(job.counts)}`);
    out(`    CSV: ${csvText.split("\r\n").length - 2} rows, ${(csvText.length / 1e6).toFixed(1)} MB in ${csvMs.toFixed(0)} ms`);
    out(
      `    DoH queries: ${queries} (${JSON.stringify(byType)}) for ${asked.size} names; bound distinct domains × 3 types = ${distinctDomains.size * 3}; ` +
        `minimum necessary ${necessary}; names asked more than once: ${ours.filter(([, n]) => n > 1).length}`,
    );
  } finally {
    for (const name of published) await request("DELETE", `${dohAdminUrl}/zone/${encodeURIComponent(name)}`);
  }
}

// --- (b) single-address throughput without DNS ------------------------------------------------------------------------

async function measure(label: string, inputs: readonly string[], check: (email: string) => unknown): Promise<number> {
  for (const email of inputs.slice(0, 2000)) await check(email);
  const cpu = cpuUsage();
  const started = performance.now();
  for (const email of inputs) await check(email);
  const used = cpuUsage(cpu);
  const perSecond = inputs.length / ((performance.now() - started) / 1000);
  out(
    `    ${label.padEnd(58)} ${Math.round(perSecond).toLocaleString("en").padStart(10)} /s   ${((used.user + used.system) / inputs.length).toFixed(2).padStart(7)} µs CPU each`,
  );
  return perSecond;
}

async function engineThroughput() {
  const engine = (await import(enginePath)) as Engine;
  const inputs = engineInputs(addressCount);
  const deps = { resolver: instantResolver };
  out(
    `(b) single-address checks without DNS, Node ${process.version}, ${inputs.length} mixed addresses (5% bad syntax, 1/3 at providers, typo and disposable domains)`,
  );
  const full = await measure("mailforge verifyEmail (syntax, lists, typo, result; DNS stub)", inputs, (email) => engine.verifyEmail(email, deps));
  const syntax = await measure("mailforge checkSyntax (syntax only)", inputs, (email) => engine.checkSyntax(email));
  const validator = await measure("email-validator validate (syntax only)", inputs, (email) => emailValidator.validate(email));
  const checker = await measure("mailchecker isValid (syntax + disposable list)", inputs, (email) => mailchecker.isValid(email));
  // The peer doing what the engine does without DNS: syntax, typo suggestion and disposable domains.
  const deep = await measure("deep-email-validator (regex, typo, disposable; MX/SMTP off)", inputs, (email) =>
    deepValidate({ email, validateRegex: true, validateTypo: true, validateDisposable: true, validateMx: false, validateSMTP: false }),
  );
  out(
    `    → verifyEmail vs deep-email-validator ${(full / deep).toFixed(2)}x; vs mailchecker ${(full / checker).toFixed(2)}x; ` +
      `checkSyntax vs email-validator ${(syntax / validator).toFixed(2)}x`,
  );

  // Where the validators disagree on the same input says more than speed alone.
  const ours = await Promise.all(inputs.map((email) => engine.verifyEmail(email, deps)));
  const syntaxOk = ours.filter((result) => result.syntax_valid).length;
  const deliverable = ours.filter((result) => result.result === "valid").length;
  out(
    `    accepted: mailforge syntax ${syntaxOk}, mailforge valid (not disposable/role) ${deliverable}, ` +
      `email-validator ${inputs.filter((email) => emailValidator.validate(email)).length}, mailchecker ${inputs.filter((email) => mailchecker.isValid(email)).length}`,
  );
}

if (!engineOnly) {
  await bulkJob();
  out();
}
if (!jobOnly) await engineThroughput();
