import { lstatSync, readdirSync, readFileSync } from "node:fs";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { relative, resolve } from "node:path";
import { defineConfig } from "vitest/config";
import { BaseSequencer, type TestSpecification } from "vitest/node";
import { unstable_readConfig } from "wrangler";
import { useMemoryForTemporaryFiles } from "./test/setup/temporary-directory";

useMemoryForTemporaryFiles();

/**
 * The packages (and subpaths) the Worker and its tests import. Each workerd runtime's module runner fetches every
 * module over a socket; pre-bundled, zod, hono and drizzle are a few modules instead of hundreds.
 * Scanned rather than listed so a new import is bundled too: a subpath left out would load a second copy of its
 * package beside the bundle (two `HTTPException` classes, and `instanceof` fails). Workspace packages (symlinked into
 * node_modules) stay source: a bundle of them would not see their edits until the optimizer's cache is cleared.
 */
function importedPackages(): string[] {
  const specifiers = new Set<string>();
  for (const dir of ["src", "test"]) {
    for (const file of readdirSync(dir, { recursive: true, encoding: "utf8" })) {
      if (!/\.tsx?$/.test(file) || /^(e2e|node|setup)\//.test(file)) continue;
      const source = readFileSync(`${dir}/${file}`, "utf8");
      // The JSX transform imports its runtime without an import statement in the source.
      if (file.endsWith(".tsx")) specifiers.add("hono/jsx/jsx-runtime").add("hono/jsx/jsx-dev-runtime");
      for (const [, specifier] of source.matchAll(/^(?:import|export)(?!\s+type\b)[^"';]*?from\s+"([^"]+)"/gm)) {
        if (/^(\.|\/|node:|cloudflare:|workerd:|vitest)/.test(specifier!) || specifier!.endsWith(".json")) continue;
        const packageName = specifier!
          .split("/")
          .slice(0, specifier!.startsWith("@") ? 2 : 1)
          .join("/");
        if (!lstatSync(`node_modules/${packageName}`).isSymbolicLink()) specifiers.add(specifier!);
      }
    }
  }
  return [...specifiers].sort();
}

/**
 * wrangler.toml's queue consumers with no batch wait: a message is handed to its consumer at once instead of after up
 * to `max_batch_timeout` seconds, which every test that goes through a real queue would otherwise spend waiting.
 * Messages sent together (one `sendBatch`) still arrive as one batch.
 */
function immediateQueueConsumers() {
  const { queues } = unstable_readConfig({ config: "./wrangler.toml" });
  type Consumer = { queue: string; max_batch_size?: number; max_retries?: number; dead_letter_queue?: string; retry_delay?: number };
  return Object.fromEntries(
    (queues.consumers ?? []).map((consumer: Consumer) => [
      consumer.queue,
      {
        maxBatchSize: consumer.max_batch_size,
        maxBatchTimeout: 0,
        maxRetries: consumer.max_retries,
        deadLetterQueue: consumer.dead_letter_queue,
        retryDelay: consumer.retry_delay,
      },
    ]),
  );
}

/**
 * wrangler.toml's [alias] entries for package specifiers, so the tests run the modules the deployed bundle has
 * (mimetext on native built-ins rather than core-js-pure's); paths from the repository root, as wrangler reads them.
 * Not the relative one (zod's `../locales/index.js`): the dependency optimizer resolves relative imports before any
 * alias, so the tests keep zod's full locale index, whose English is the same.
 */
function wranglerAliases() {
  const aliases: Record<string, string> = unstable_readConfig({ config: "./wrangler.toml" }).alias ?? {};
  return Object.entries(aliases)
    .filter(([find]) => !find.startsWith("."))
    .map(([find, replacement]) => ({ find, replacement: resolve(replacement) }));
}

/**
 * Test files that act on everything in their runtime rather than on accounts of their own: the cron and the sweeps
 * (they process every account's rows), fake clocks and spies (they change the isolate the Worker runs in), and the
 * in-memory key cache. Found by reading the files, so a new file that runs the cron is treated as one without anyone
 * remembering to list it.
 */
const globalStatePattern =
  /runCron|\.scheduled\(|sweep[A-Z]\w*\(|requeue\w*\(|resumeStalled\w*\(|purgeExpiredData|vi\.(useFakeTimers|spyOn|mock|stubGlobal)|authenticateApiKey/;
// Read once per config load, so the sequencer and the setup file's check (given it through `provide`) agree.
const globalStateFiles = readdirSync("test", { recursive: true, encoding: "utf8" })
  .map((file) => `test/${file.replaceAll("\\", "/")}`)
  .filter((file) => file.endsWith(".test.ts") && !/^test\/(e2e|node)\//.test(file))
  .filter((file) => globalStatePattern.test(readFileSync(file, "utf8")));

/**
 * Files that take longest (real queue delays and timers, the fuzzer's hundreds of requests), started before the rest of
 * their kind so the suite does not end on one of them while the other runtimes sit idle. Without durations from an
 * earlier run (a clean clone) Vitest starts the largest files first, which left the small fuzzer file for last: 20 s at
 * the end of `npm test` with one runtime busy. test/sending/faults.test.ts among them: its SMTP client waits for the
 * fault sink (which lives in this process, busiest while the runtimes start) as long as a deployment's would.
 */
const longFiles = [
  "test/sending/schedule.test.ts",
  "test/campaigns/settlement.test.ts",
  "test/sending/faults.test.ts",
  "test/inbound/receive.test.ts",
  "test/retention/purge.test.ts",
  "test/automations/automations.test.ts",
  "test/platform/fuzz.test.ts",
  "test/verification/mailbox.test.ts",
];

/**
 * The files run one after another in a few runtimes whose storage they share, so a file that sweeps every account's
 * rows must not follow one that left rows behind. Every global-state file is therefore started before any other: a
 * runtime that has begun on the other files is never handed a global-state one (test/setup/apply-migrations.ts checks
 * it). Within each kind the long files go first.
 */
class GlobalStateFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const global = new Set(globalStateFiles);
    const rank = (spec: TestSpecification) => {
      const file = relative(process.cwd(), spec.moduleId).replaceAll("\\", "/");
      const long = longFiles.indexOf(file);
      return (global.has(file) ? 0 : longFiles.length + 1) + (long < 0 ? longFiles.length : long);
    };
    // Array.prototype.sort is stable: files of the same rank keep Vitest's order.
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig(async () => {
  const migrations = await readD1Migrations("./migrations");
  return {
    plugins: [
      cloudflareTest(({ inject }) => ({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          queueConsumers: immediateQueueConsumers(),
          bindings: {
            TEST_MIGRATIONS: migrations,
            ADMIN_TOKEN: "test-admin-token",
            BRIDGE_SECRET: "test-bridge-secret",
            DKIM_ENCRYPTION_KEY: "dGVzdC1ka2ltLWVuY3J5cHRpb24ta2V5LTMyYnl0ZXM=",
            SMTP_UPSTREAM_USER: "",
            SMTP_UPSTREAM_PASS: "",
            // Empty, so the session key is derived from DKIM_ENCRYPTION_KEY as in a deployment without one. Every
            // secret `npm run dev` writes to .dev.vars is set here: the e2e stack creates that file in a clean clone
            // while this suite runs, and files started after it would otherwise read its values.
            SESSION_SECRET: "",
            // The platform's own mail (sign-in links, invitations), as the local stack sends it.
            SYSTEM_FROM: "Mailforge <no-reply@demo.mailforge.test>",
            // mailbox checks stay off here (test/verification/mailbox.test.ts turns them on with TEST_PROBER_*)
            PROBER_URL: "",
            PROBER_SECRET: "",
            DOH_URL: inject("dohUrl"),
            SMTP_UPSTREAM_HOST: "127.0.0.1",
            SMTP_UPSTREAM_PORT: String(inject("sinkSmtpPort")),
            SMTP_UPSTREAM_SECURE: "off",
            ALLOW_PRIVATE_WEBHOOK_URLS: "true",
            // VERP return paths and the email() handler's domain (test/feedback).
            BOUNCE_DOMAIN: "bounces.mailforge.test",
            REPUTATION_MIN_SENT: "5",
            // SES notifications (test/feedback/ses.test.ts): the webhook receiver serves the SNS signing certificate.
            SES_SNS_TOPIC_ARNS: "arn:aws:sns:us-east-1:123456789012:ses-feedback",
            SNS_TRUSTED_CERT_ORIGIN: inject("webhookReceiverUrl"),
            // Retries go back on the real queue at once, so retry paths cost no waiting; the back-off arithmetic
            // is asserted with an explicit base (test/sending/delivery.test.ts).
            SEND_RETRY_BASE_SECONDS: "0",
            // No monthly grant: the suite's accounts start with exact balances that a cron run must not change. The
            // grant runs with a deployment's setting in test/credits/monthly-credits.test.ts.
            MONTHLY_VERIFY_CREDITS: "{}",
            SEND_MAX_ATTEMPTS: "3",
            TEST_SINK_HTTP_URL: inject("sinkHttpUrl"),
            TEST_FAULT_SINK_SMTP_PORT: String(inject("faultSinkSmtpPort")),
            TEST_FAULT_SINK_HTTP_URL: inject("faultSinkHttpUrl"),
            TEST_DOH_ADMIN_URL: inject("dohAdminUrl"),
            TEST_WEBHOOK_RECEIVER_URL: inject("webhookReceiverUrl"),
            // The mailbox prober, for the tests that turn mailbox checks on (PROBER_URL itself stays unset).
            TEST_PROBER_URL: inject("proberUrl"),
            // the PROBER_SECRET test/setup/global-setup.ts starts the prober with
            TEST_PROBER_SECRET: "test-prober-secret-0123456789",
            // AI drafts against the fake OpenAI-compatible provider (test/setup/ai-provider.ts); retries at once,
            // a short time-out so the time-out path costs little.
            AI_BASE_URL: `${inject("aiProviderUrl")}/v1`,
            AI_MODEL: "test-model",
            AI_API_KEY: "test-ai-key",
            AI_RETRY_BASE_SECONDS: "0",
            AI_TIMEOUT_SECONDS: "2",
            TEST_AI_PROVIDER_URL: inject("aiProviderUrl"),
            // How many broken requests the fuzzer sends each operation (test/platform/fuzz.test.ts).
            TEST_FUZZ_REQUESTS_PER_OPERATION: process.env.FUZZ_REQUESTS_PER_OPERATION ?? "5",
          },
        },
      })),
    ],
    resolve: { alias: wranglerAliases() },
    test: {
      globalSetup: ["./test/setup/global-setup.ts", "./test/setup/ai-provider.ts"],
      // Each worker is a workerd of its own (its own D1, queues, Durable Objects). Vitest's default of cores − 1 runs
      // one at a time on 2 cores, while most of a file's time is spent waiting on queues and loopback servers. Four
      // are quicker alone (125 s against 140 s), but not beside the Node suite in `npm test`, where the machine is
      // already short of cores and a runtime starved that long lost a connection to its own Durable Object.
      maxWorkers: 3,
      // Three workerd runtimes share 2 cores with whatever else the machine runs; a test that waits on real queues
      // and timers gets more than Vitest's default 5 s before it counts as hung.
      testTimeout: 15_000,
      sequence: { sequencer: GlobalStateFirst },
      deps: { optimizer: { ssr: { enabled: true, include: importedPackages() } } },
      include: ["test/**/*.test.ts"],
      exclude: ["test/e2e/**", "test/node/**"],
      // Loading the Worker into a fresh workerd and migrating its D1 costs seconds of CPU per runtime, more than most
      // files' tests take. So files run one after another in a few runtimes whose storage they share (`isolate:
      // false`), each test making its own account; files of pure functions too, as a runtime of their own would cost
      // more than they do. One project, so that one set of runtimes serves every file: a second project would start
      // runtimes of its own, each loading the Worker again while the machine is busiest.
      isolate: false,
      setupFiles: ["./test/setup/apply-migrations.ts"],
      provide: { globalStateFiles },
    },
  };
});
