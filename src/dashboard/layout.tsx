// The page shell and the small pieces every dashboard page shares. Everything here goes through hono/jsx, which
// escapes text and attribute values; nothing takes raw HTML.

import type { Child } from "hono/jsx";
import { hasScope } from "../domain/accounts/api-keys";
import type { AuthContext, Scope } from "../types";

export const assetPath = "/dashboard/assets";

export type Section = {
  path: string;
  label: string;
  /** The scope a key needs to see the section; `full_access` for API keys, like the API. */
  needs: Scope | "full_access";
};

export const sections: Section[] = [
  { path: "/dashboard", label: "Overview", needs: "reports" },
  { path: "/dashboard/messages", label: "Messages", needs: "send" },
  { path: "/dashboard/inbound", label: "Inbound", needs: "inbound" },
  { path: "/dashboard/domains", label: "Domains", needs: "domains" },
  { path: "/dashboard/api-keys", label: "API keys", needs: "full_access" },
  { path: "/dashboard/smtp-credentials", label: "SMTP", needs: "send" },
  { path: "/dashboard/webhooks", label: "Webhooks", needs: "webhooks" },
  { path: "/dashboard/verification", label: "Verification", needs: "verify" },
  { path: "/dashboard/contacts", label: "Contacts", needs: "contacts" },
  { path: "/dashboard/campaigns", label: "Campaigns", needs: "campaigns" },
  { path: "/dashboard/automations", label: "Automations", needs: "automations" },
  { path: "/dashboard/ai", label: "AI drafts", needs: "ai" },
  { path: "/dashboard/usage", label: "Credits & usage", needs: "reports" },
];

export const canSee = (auth: AuthContext, needs: Section["needs"]) =>
  needs === "full_access" ? auth.apiKey.scopes === null : hasScope(auth.apiKey, needs);

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

function Header({ auth, csrfToken, current }: { auth: AuthContext; csrfToken: string; current?: string }) {
  return (
    <header class="top">
      <div class="brand">
        <a href="/dashboard">Mailforge</a>
        <span class="account">
          {auth.account.name}
          {auth.apiKey.mode === "test" ? <span class="badge warn">test key</span> : null}
        </span>
      </div>
      <nav aria-label="Sections">
        <ul>
          {sections
            .filter((section) => canSee(auth, section.needs))
            .map((section) => (
              <li>
                <a href={section.path} aria-current={section.path === current ? "page" : undefined}>
                  {section.label}
                </a>
              </li>
            ))}
        </ul>
      </nav>
      <form method="post" action="/dashboard/sign-out" class="sign-out">
        <input type="hidden" name="_csrf" value={csrfToken} />
        <button type="submit" class="link">
          Sign out ({auth.apiKey.name})
        </button>
      </form>
    </header>
  );
}

export const Csrf = ({ token }: { token: string }) => <input type="hidden" name="_csrf" value={token} />;

export function Empty({ children }: { children: Child }) {
  return <p class="empty">{children}</p>;
}

export function Notice({ kind, children }: { kind: "ok" | "error" | "warn"; children: Child }) {
  return (
    <div class={`notice ${kind}`} role={kind === "error" ? "alert" : "status"}>
      {children}
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
  return <span class={`badge ${tone}`}>{status}</span>;
}

export const formatTime = (iso: string | null | undefined) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$|Z$/, " UTC") : "—");

export const percent = (fraction: number) => `${(fraction * 100).toFixed(2)}%`;

export function Pager({ next, base }: { next: string | null; base: string }) {
  if (!next) return null;
  const url = `${base}${base.includes("?") ? "&" : "?"}cursor=${encodeURIComponent(next)}`;
  return (
    <p>
      <a href={url}>Older →</a>
    </p>
  );
}
