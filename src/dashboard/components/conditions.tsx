// The condition builder of a segment, which an automation's condition step reuses (its conditions are a segment's):
// rows of field, operator and value, the all/any choice, and the function that reads the rows back as conditions.
import { segmentOperators } from "../../domain/segments/conditions";
import type { SegmentCondition } from "../../domain/segments/segments";

/** A parsed form or query, each field one value or several. */
export type Form = Record<string, string | File | (string | File)[]>;

const operatorLabels: Record<(typeof segmentOperators)[number], string> = {
  eq: "is",
  neq: "is not",
  contains: "contains",
  starts_with: "starts with",
  ends_with: "ends with",
  exists: "is set",
  not_exists: "is not set",
  gt: "is after / more than",
  gte: "is on or after / at least",
  lt: "is before / less than",
  lte: "is on or before / at most",
  in: "is one of",
  not_in: "is none of",
  within_days: "within the last … days",
};
const listValued = new Set(["in", "not_in"]);

const strings = (form: Form, name: string) => ([] as unknown[]).concat(form[name] ?? []).map((value) => (typeof value === "string" ? value : ""));

/**
 * The builder's rows as the API's `conditions`: rows without a field are left out; `in`/`not_in` and `list` take
 * comma-separated values, `within_days` a number, `exists`/`not_exists` none. Anything else is the schema's to judge.
 */
export function conditionsOf(form: Form): SegmentCondition[] {
  const fields = strings(form, "field");
  const ops = strings(form, "op");
  const values = strings(form, "value");
  const conditions: SegmentCondition[] = [];
  fields.forEach((raw, index) => {
    const field = raw.trim();
    if (field === "") return;
    const op = ops[index] ?? "";
    const text = (values[index] ?? "").trim();
    if (op === "exists" || op === "not_exists") conditions.push({ field, op });
    else if (listValued.has(op) || field === "list")
      conditions.push({
        field,
        op,
        value: text
          .split(",")
          .map((part) => part.trim())
          .filter(Boolean),
      });
    else if (op === "within_days" && /^\d+$/.test(text)) conditions.push({ field, op, value: Number(text) });
    else conditions.push({ field, op, value: text });
  });
  return conditions;
}

/** A condition's value as typed in the builder: a list comma-separated. */
export const shownValue = (value: unknown) => (Array.isArray(value) ? value.join(", ") : value === undefined ? "" : String(value));

/** The all/any choice; `match` as saved (anything but "any" is "all"). */
export function MatchSelect({ id, match }: { id: string; match: unknown }) {
  return (
    <select id={id} name="match">
      <option value="all" selected={match !== "any"}>
        all conditions
      </option>
      <option value="any" selected={match === "any"}>
        any condition
      </option>
    </select>
  );
}

type ConditionRowsProps = {
  /** The saved or typed conditions, then `undefined` for each blank row to offer. */
  rows: ({ field?: string; op?: string; value?: unknown } | undefined)[];
  /** The id of a datalist of field names to suggest. */
  suggestions?: string;
};

/** The builder's rows; `conditionsOf` reads them back. */
export function ConditionRows({ rows, suggestions }: ConditionRowsProps) {
  return (
    <>
      {rows.map((condition, index) => (
        <div class="condition">
          <label>
            Field
            <input name="field" type="text" list={suggestions} value={condition?.field ?? ""} aria-label={`Condition ${index + 1} field`} />
          </label>
          <label>
            Operator
            <select name="op" aria-label={`Condition ${index + 1} operator`}>
              {segmentOperators.map((op) => (
                <option value={op} selected={condition?.op === op}>
                  {operatorLabels[op]}
                </option>
              ))}
            </select>
          </label>
          <label>
            Value
            <input name="value" type="text" value={shownValue(condition?.value)} aria-label={`Condition ${index + 1} value`} />
          </label>
        </div>
      ))}
    </>
  );
}
