// Stands in for @babel/runtime-corejs3's defineProperty helper in the deployed bundle (wrangler.toml's [alias]).
// mimetext's browser build calls it for its class fields, and the original pulls core-js-pure's Object.defineProperty
// and Symbol polyfills (~40 KiB) into a runtime that has both natively. Same semantics: an own, enumerable, writable,
// configurable data property, whether or not the key was already there.
export default function defineProperty<T extends object>(target: T, key: PropertyKey, value: unknown): T {
  return Object.defineProperty(target, key, { value, enumerable: true, configurable: true, writable: true });
}
