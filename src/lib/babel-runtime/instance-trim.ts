// Stands in for @babel/runtime-corejs3's `instance/trim` in the deployed bundle (wrangler.toml's [alias]): mimetext
// calls `trim(value).call(value)` on strings, and the original reaches String.prototype.trim through core-js-pure's
// polyfill machinery. Like the original, it returns the value's own `trim` method (String.prototype.trim for a string).
export default function instanceTrim(value: { trim: () => string }): () => string {
  return value.trim;
}
