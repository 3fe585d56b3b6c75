import { Csrf } from "../layout";

type NameFormProps = { action: string; csrfToken: string; label: string; maxlength: number; placeholder?: string; submit: string };

/** A form that creates something from its name alone (a domain, a list, a credential): one field and a button, on one line. */
export function NameForm({ action, csrfToken, label, maxlength, placeholder, submit }: NameFormProps) {
  return (
    <form method="post" action={action} class="inline">
      <Csrf token={csrfToken} />
      <label>
        {label}
        <input name="name" type="text" required maxlength={maxlength} placeholder={placeholder} />
      </label>
      <button type="submit">{submit}</button>
    </form>
  );
}
