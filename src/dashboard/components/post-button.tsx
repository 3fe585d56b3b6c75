import type { Child } from "hono/jsx";
import { Csrf } from "../layout";

type PostButtonProps = {
  action: string;
  csrfToken: string;
  /** The button's text. */
  children: Child;
  /** The button's class: `danger` for what deletes or revokes, `secondary` beside a page's main action. */
  tone?: string;
  /** The button's accessible name, where its text alone does not say what it acts on (a row's "Delete"). */
  label?: string;
  /** The form's class: `inline` on a line of its own, `inline-button` inside a row or a list item. */
  layout?: "inline" | "inline-button";
  /** Fixed fields posted with it, such as the state a toggle switches to. */
  fields?: Record<string, string>;
  /** Posted by htmx when script runs, its answer put in `target`; a plain POST otherwise. */
  htmx?: { target: string; swap?: string };
};

/** A form that is one button: an action on one thing (delete, revoke, rotate, pause), posted with the CSRF token. */
export function PostButton({ action, csrfToken, children, tone, label, layout, fields = {}, htmx }: PostButtonProps) {
  return (
    <form method="post" action={action} class={layout} hx-post={htmx ? action : undefined} hx-target={htmx?.target} hx-swap={htmx?.swap}>
      <Csrf token={csrfToken} />
      {Object.entries(fields).map(([name, value]) => (
        <input type="hidden" name={name} value={value} />
      ))}
      <button type="submit" class={tone} aria-label={label}>
        {children}
      </button>
    </form>
  );
}
