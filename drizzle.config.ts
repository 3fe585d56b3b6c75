import { defineConfig } from "drizzle-kit";

export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema/index.ts",
  out: "./migrations",
  // Timestamped names sort after the numbered migrations written before (0000-0020, some by hand), for wrangler, which
  // applies them in name order, and for drizzle-kit, which takes the last snapshot by name as the schema to diff from.
  migrations: { prefix: "timestamp" },
});
