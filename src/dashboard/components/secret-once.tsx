import { Copyable, Notice } from "../layout";

/** A new or rotated secret, on the one page that ever shows it. */
export function SecretOnce({ title, secret, label }: { title: string; secret: string; label: string }) {
  return (
    <Notice kind="ok">
      <strong>{title}</strong> Copy it now: it is shown only this once.
      <span class="secret" data-testid="new-secret">
        <Copyable value={secret} label={label} />
      </span>
    </Notice>
  );
}
