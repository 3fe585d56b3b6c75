// Starts the API reference on /api/v1/docs with Scalar, which this Worker serves from its own static assets
// (public/api-reference/vendor/, copied from node_modules by `npm run assets`). A file rather than an inline script,
// so the page's Content-Security-Policy can allow scripts from 'self' only. No default fonts: they would come from
// Scalar's font host, and the page must not reach any other host.
Scalar.createApiReference("#app", {
  url: "/api/v1/openapi.json",
  withDefaultFonts: false,
});
