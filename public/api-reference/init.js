// Starts the API reference on /api/v1/docs with Scalar, which this Worker serves from its own static assets
// (public/api-reference/vendor/, put there by `npm run assets`). A file rather than an inline script,
// so the page's Content-Security-Policy can allow scripts from 'self' only. No default fonts: they would come from
// Scalar's font host; no developer tools and no agent (Scalar turns both on for localhost): they query Scalar's
// registry through its proxy. The page must not reach any other host (its Content-Security-Policy refuses it anyway).
Scalar.createApiReference("#app", {
  url: "/api/v1/openapi.json",
  withDefaultFonts: false,
  showDeveloperTools: "never",
  agent: { disabled: true },
});
