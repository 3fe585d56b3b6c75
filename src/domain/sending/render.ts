// Template placeholders: `{{name}}` and `{{name|fallback}}` in subject, html and text.
// Substitution is a single regex pass over the source: templates are data, never evaluated as code, and a value
// that itself contains `{{...}}` is inserted literally (the pass does not revisit replaced text).

export type TemplateVariables = Readonly<Record<string, unknown>>;

export interface RenderOptions {
  /** Escape values (and fallbacks) for HTML: `& < > " '`. Subject and text get them raw. */
  html: boolean;
}

// The fallback is bounded so that many unterminated `{{x|` in a large body cannot make matching quadratic.
const PLACEHOLDER = /\{\{\s*([A-Za-z0-9_.-]+)\s*(?:\|([^{}]{0,500}))?\}\}/g;

const HTML_ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => HTML_ESCAPES[char]!);
}

/**
 * A flat key wins (`{"user.name": "Ann"}`); otherwise a dotted name walks nested objects (`{user: {name: "Ann"}}`).
 * Only own properties are read, so `constructor` or `__proto__` never reach into prototypes.
 */
function lookup(variables: TemplateVariables, name: string): unknown {
  if (Object.hasOwn(variables, name)) return variables[name];
  if (!name.includes(".")) return undefined;
  let current: unknown = variables;
  for (const segment of name.split(".")) {
    if (current === null || typeof current !== "object" || !Object.hasOwn(current, segment)) return undefined;
    current = (current as Record<string, unknown>)[segment];
  }
  return current;
}

function stringify(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  if (typeof value === "boolean") return value ? "true" : "false";
  // null, undefined, objects and arrays have no sensible text form in a message: treat as missing.
  return undefined;
}

/**
 * Replaces placeholders with variable values. A missing, null or empty value uses the fallback when one is
 * given, else renders as the empty string.
 */
export function renderTemplate(source: string, variables: TemplateVariables, options: RenderOptions): string {
  return source.replace(PLACEHOLDER, (_match, name: string, fallback: string | undefined) => {
    const value = stringify(lookup(variables, name));
    const text = value !== undefined && value !== "" ? value : (fallback?.trim() ?? "");
    return options.html ? escapeHtml(text) : text;
  });
}

/** Distinct placeholder names in order of first use, e.g. to tell which variables a template expects. */
export function placeholderNames(source: string): string[] {
  const names = new Set<string>();
  for (const match of source.matchAll(PLACEHOLDER)) names.add(match[1]!);
  return [...names];
}
