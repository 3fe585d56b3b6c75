// The page shell and the small pieces every dashboard page shares. Everything here goes through hono/jsx, which
// escapes text and attribute values; nothing takes raw HTML.

import type { Child } from "hono/jsx";
import { keyMay, roleMay, type AreaName } from "../domain/accounts/roles";
import { encodeCursor, type Position } from "../lib/pagination";
import type { AuthContext } from "../types";

export const assetPath = "/dashboard/assets";

/**
 * The policy of a page that shows mail HTML inside a sandboxed frame: `sandbox` without allow-* tokens gives it an
 * opaque origin and runs no script, and nothing loads but inline styles and data: images. `remoteImages` lets a
 * preview of our own draft load its https images; mail that was sent or received never does, since a remote image
 * there is someone's tracking pixel (ours counts an open).
 */
export const framedMailCsp = ({ remoteImages = false } = {}) =>
  `sandbox; default-src 'none'; img-src ${remoteImages ? "https: " : ""}data:; style-src 'unsafe-inline'; font-src data:; frame-ancestors 'self'; base-uri 'none'`;

export type Section = {
  path: string;
  label: string;
  /** What the section is about: the roles and key scopes that see it (src/domain/accounts/roles.ts). */
  needs: AreaName;
  /** Set-up sections (and AI drafts, the least used), behind the nav's "Settings" menu so the nav stays on one line at 1280 px. */
  group?: "settings";
};

export const sections: Section[] = [
  { path: "/dashboard", label: "Overview", needs: "reports" },
  { path: "/dashboard/messages", label: "Messages", needs: "send" },
  { path: "/dashboard/inbound", label: "Inbound", needs: "inbound" },
  { path: "/dashboard/campaigns", label: "Campaigns", needs: "campaigns" },
  { path: "/dashboard/templates", label: "Templates", needs: "templates" },
  { path: "/dashboard/segments", label: "Segments", needs: "contacts" },
  { path: "/dashboard/contacts", label: "Contacts", needs: "contacts" },
  { path: "/dashboard/automations", label: "Automations", needs: "automations" },
  { path: "/dashboard/verification", label: "Verification", needs: "verify" },
  { path: "/dashboard/domains", label: "Domains", needs: "domains", group: "settings" },
  { path: "/dashboard/api-keys", label: "API keys", needs: "api_keys", group: "settings" },
  { path: "/dashboard/smtp-credentials", label: "SMTP", needs: "send", group: "settings" },
  { path: "/dashboard/webhooks", label: "Webhooks", needs: "webhooks", group: "settings" },
  { path: "/dashboard/usage", label: "Credits & usage", needs: "reports", group: "settings" },
  { path: "/dashboard/ai", label: "AI drafts", needs: "ai", group: "settings" },
  { path: "/dashboard/members", label: "Members", needs: "members", group: "settings" },
  { path: "/dashboard/audit-log", label: "Audit log", needs: "audit_log", group: "settings" },
];

/** Whether the signed-in member's role, or key's scopes, let them read the area (or, with `change`, change it). */
export const canSee = (auth: AuthContext, needs: AreaName, change = false) =>
  auth.member ? roleMay(auth.member.role, needs, change) : keyMay(auth.apiKey, needs);

/** Where a person or key lands: the overview, or the first section they may see. */
export const firstSection = (auth: AuthContext) => sections.find((section) => canSee(auth, section.needs))?.path ?? "/dashboard/usage";

type ShellProps = { title: string; auth?: AuthContext; csrfToken?: string; current?: string; children: Child };

export function Shell({ title, auth, csrfToken, current, children }: ShellProps) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        {/* htmx would otherwise add a <style> element, which the Content-Security-Policy refuses. */}
        <meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowScriptTags":false,"allowEval":false}' />
        <title>{`${title} · Mailforge`}</title>
        <link rel="stylesheet" href={`${assetPath}/dashboard.css`} />
        <link rel="stylesheet" href={`${assetPath}/vendor/uPlot.min.css`} />
        <script src={`${assetPath}/vendor/htmx.min.js`} defer />
        <script src={`${assetPath}/vendor/uPlot.iife.min.js`} defer />
        <script src={`${assetPath}/dashboard.js`} defer />
      </head>
      {/* htmx sends the CSRF token with every request it makes from inside the body. */}
      <body hx-headers={csrfToken ? JSON.stringify({ "X-CSRF-Token": csrfToken }) : undefined}>
        <a class="skip" href="#main">
          Skip to content
        </a>
        {auth ? <Header auth={auth} csrfToken={csrfToken ?? ""} current={current} /> : null}
        <main id="main" tabindex={-1}>
          <h1>{title}</h1>
          {children}
        </main>
      </body>
    </html>
  );
}

function NavLink({ section, current }: { section: Section; current?: string }) {
  return (
    <li>
      <a href={section.path} aria-current={section.path === current ? "page" : undefined}>
        {section.label}
      </a>
    </li>
  );
}

function Header({ auth, csrfToken, current }: { auth: AuthContext; csrfToken: string; current?: string }) {
  const visible = sections.filter((section) => canSee(auth, section.needs));
  const settings = visible.filter((section) => section.group === "settings");
  return (
    <header class="top">
      <div class="brand">
        <a href="/dashboard">Mailforge</a>
        <span class="account">
          {auth.account.name}
          {auth.apiKey.mode === "test" ? <span class="badge warn">test key</span> : null}
          {auth.member ? <span class="badge">{auth.member.role}</span> : null}
        </span>
      </div>
      {/* Phones: the sections open from a menu button (dashboard.js); without script they are listed below. */}
      <button type="button" class="menu-toggle" aria-expanded="false" aria-controls="sections">
        Menu
      </button>
      <nav id="sections" aria-label="Sections">
        <ul>
          {visible
            .filter((section) => !section.group)
            .map((section) => (
              <NavLink section={section} current={current} />
            ))}
          {settings.length > 0 ? (
            <li class="more">
              <details>
                <summary aria-current={settings.some((section) => section.path === current) ? "page" : undefined}>Settings</summary>
                <ul>
                  {settings.map((section) => (
                    <NavLink section={section} current={current} />
                  ))}
                </ul>
              </details>
            </li>
          ) : null}
        </ul>
      </nav>
      {auth.member ? (
        <a href="/dashboard/security" class="security" aria-current={current === "/dashboard/security" ? "page" : undefined}>
          Security
        </a>
      ) : null}
      <form method="post" action="/dashboard/sign-out" class="sign-out">
        <input type="hidden" name="_csrf" value={csrfToken} />
        <button type="submit" class="link" title={auth.member ? `Signed in as ${auth.member.email}` : `Signed in with the key "${auth.apiKey.name}"`}>
          Sign out
        </button>
      </form>
    </header>
  );
}

export const Csrf = ({ token }: { token: string }) => <input type="hidden" name="_csrf" value={token} />;

export function Empty({ children }: { children: Child }) {
  return <p class="empty">{children}</p>;
}

/** A message written for the API (`scope` in backticks) as text with code spans, never literal backticks. */
export function InlineCode({ text }: { text: string }) {
  return <>{text.split("`").map((part, index) => (index % 2 === 1 ? <code>{part}</code> : part))}</>;
}

export function Notice({ kind, children }: { kind: "ok" | "error" | "warn"; children: Child }) {
  return (
    <div class={`notice ${kind}`} role={kind === "error" ? "alert" : "status"}>
      {typeof children === "string" ? <InlineCode text={children} /> : children}
    </div>
  );
}

export function Progress({ label, done, total }: { label: string; done: number; total: number }) {
  const percent = total === 0 ? 100 : Math.min(100, Math.floor((done / total) * 100));
  return (
    <div class="progress">
      <progress max={100} value={percent} aria-label={label}>
        {percent}%
      </progress>
      <span class="progress-text">
        {percent}% ({done.toLocaleString("en")} of {total.toLocaleString("en")})
      </span>
    </div>
  );
}

/** A value to copy: the text, and a button that dashboard.js wires to the clipboard. */
export function Copyable({ value, label }: { value: string; label: string }) {
  return (
    <span class="copyable">
      <code>{value}</code>
      <button type="button" class="copy" data-copy={value} aria-label={`Copy ${label}`}>
        Copy
      </button>
    </span>
  );
}

export function StatusBadge({ status }: { status: string }) {
  const tone = /^(verified|delivered|sent|completed|valid|active|safe|ok)$/.test(status)
    ? "ok"
    : /^(failed|bounced|invalid|complained|cancelled|bad|held)$/.test(status)
      ? "bad"
      : "";
  // Stored statuses are snake_case (`not_found`); people read words.
  return <span class={`badge ${tone}`}>{status.replace(/_/g, " ")}</span>;
}

export const formatTime = (iso: string | null | undefined) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : "—");

export const percent = (fraction: number) => `${(fraction * 100).toFixed(2)}%`;

/**
 * A page of rows fetched one past `size`, as the API's pageOf reads them: the first `size`, and the cursor of the
 * next page when there is one.
 */
export function pageOfRows<Row extends Position>(rows: Row[], size: number): { page: Row[]; next: string | null } {
  const page = rows.slice(0, size);
  const last = page.at(-1);
  return { page, next: rows.length > size && last ? encodeCursor(last) : null };
}

/** The link to the next page: this page's query (its filters) with the next cursor, when there is a next page. */
export function Pager({ next, path, query }: { next: string | null; path: string; query: Record<string, string> }) {
  if (!next) return null;
  const filters = new URLSearchParams(Object.entries(query).filter(([name, value]) => name !== "cursor" && value !== ""));
  filters.set("cursor", next);
  return (
    <p>
      <a href={`${path}?${filters}`}>Older →</a>
    </p>
  );
}
