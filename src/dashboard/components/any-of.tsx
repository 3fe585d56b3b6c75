/** A search form's choice of one value to filter on, or "any": each option is a value and the text shown for it. */
export function AnyOf({
  label,
  name,
  options,
  selected,
}: {
  label: string;
  name: string;
  options: [value: string, text: string][];
  selected?: string;
}) {
  return (
    <label>
      {label}
      <select name={name}>
        <option value="">any</option>
        {options.map(([value, text]) => (
          <option value={value} selected={selected === value}>
            {text}
          </option>
        ))}
      </select>
    </label>
  );
}
