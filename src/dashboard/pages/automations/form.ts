// An automation's step form, read back as the API's step: the fields of the chosen step type in the names
// POST /automations takes, blank ones left out so the API's schema names what is missing.

import { contactTextFields } from "../../../domain/contacts/contacts";
import { conditionsOf, type Form } from "../../components/conditions";

/** A step as the form gave it, before the schema has judged it (shown back as typed when refused). */
export type Draft = Record<string, unknown> & { type: StepType };

export const stepTypes = ["send_email", "wait", "add_to_list", "remove_from_list", "update_contact", "condition", "webhook", "verify"] as const;
export type StepType = (typeof stepTypes)[number];
export const stepLabels: Record<StepType, string> = {
  send_email: "Send an email",
  wait: "Wait",
  add_to_list: "Add to a list",
  remove_from_list: "Remove from a list",
  update_contact: "Update the contact",
  condition: "Continue only if",
  webhook: "Call a webhook",
  verify: "Verify the address",
};
export const isStepType = (value: string): value is StepType => (stepTypes as readonly string[]).includes(value);
export const waitUnits = { minutes: 60, hours: 3600, days: 86_400 } as const;
export type WaitUnit = keyof typeof waitUnits;

export const text = (form: Form, name: string) => {
  const value = form[name];
  return typeof value === "string" ? value.trim() : "";
};

/** The step's form fields as the API names them; blank fields are left out, so the schema's own rules name what is missing. */
export function stepOf(type: StepType, form: Form): Draft {
  const given = (name: string) => (text(form, name) === "" ? {} : { [name]: text(form, name) });
  switch (type) {
    case "send_email": {
      const raw = (name: string) => (typeof form[name] === "string" && form[name] !== "" ? { [name]: form[name] } : {});
      return {
        type,
        ...given("sender_id"),
        ...given("template_id"),
        ...given("subject"),
        ...raw("html"),
        ...raw("text"),
        ...given("stream"),
        ...given("topic_id"),
      };
    }
    case "wait": {
      const until = text(form, "until");
      // A datetime-local control has no zone; the form says it is UTC.
      if (until !== "") return { type, until: /^\d{4}-\d\d-\d\dT\d\d:\d\d$/.test(until) ? `${until}:00Z` : until };
      const amount = text(form, "amount");
      if (amount === "") return { type };
      const unit = (text(form, "unit") in waitUnits ? text(form, "unit") : "days") as WaitUnit;
      return { type, seconds: /^\d+$/.test(amount) ? Number(amount) * waitUnits[unit] : amount };
    }
    case "add_to_list":
    case "remove_from_list":
      return { type, ...given("list_id") };
    case "update_contact": {
      const fields = Object.fromEntries(contactTextFields.filter((name) => text(form, name) !== "").map((name) => [name, text(form, name)]));
      const custom = Object.fromEntries(
        text(form, "custom_fields")
          .split(/\r?\n/)
          .map((line) => line.trim())
          .filter(Boolean)
          .map((line) => {
            const at = line.indexOf("=");
            return at < 0 ? [line, ""] : [line.slice(0, at).trim(), line.slice(at + 1).trim()];
          }),
      );
      return {
        type,
        ...(Object.keys(fields).length > 0 ? { fields } : {}),
        ...(Object.keys(custom).length > 0 ? { custom_fields: custom } : {}),
      };
    }
    case "condition":
      return { type, match: text(form, "match") || "all", conditions: conditionsOf(form) };
    case "webhook":
      return { type, ...given("url") };
    case "verify":
      return { type };
  }
}
