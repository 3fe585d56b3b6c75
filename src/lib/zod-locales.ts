// Stands in for zod's `locales/index.js` in the deployed bundle (wrangler.toml's [alias]). zod re-exports all of its
// ~50 locales from its namespace object, so any `import { z } from "zod"` bundles every one of them (a third of the
// Worker's size). Its errors are only ever English here, the locale zod registers by default.
export { default as en } from "zod/v4/locales/en.js";
