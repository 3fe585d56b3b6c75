import { z } from "zod";
import { createDohServer } from "./doh-server.ts";

const envSchema = z.object({
  DOH_PORT: z.coerce.number().int().min(0).max(65535).default(8053),
  DOH_HOST: z.string().min(1).default("127.0.0.1"),
  DOH_ZONE: z.string().min(1).default(".dev/zone.json"),
});

const env = envSchema.safeParse(process.env);
if (!env.success) {
  console.error(`dev DoH server: invalid environment\n${z.prettifyError(env.error)}`);
  process.exit(1);
}

const { DOH_PORT, DOH_HOST, DOH_ZONE } = env.data;
const doh = createDohServer({ zonePath: DOH_ZONE });
const port = await doh.listen(DOH_PORT, DOH_HOST);
const urlHost = DOH_HOST.includes(":") ? `[${DOH_HOST}]` : DOH_HOST;
console.log(`dev DoH server: http://${urlHost}:${port}/dns-query (zone ${DOH_ZONE})`);

for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void doh.close().finally(() => process.exit(0));
  });
}
