import type { Child } from "hono/jsx";
import { Empty } from "../layout";

type TableProps<Row> = {
  head: string[];
  rows: readonly Row[];
  row: (row: Row, index: number) => Child;
  /** Shown instead of the table when there are no rows; without it an empty table keeps its headings. */
  empty?: Child;
};

/** The dashboard's tables: column headings, one `<tr>` a row, scrolling sideways on a narrow screen. */
export function Table<Row>({ head, rows, row, empty }: TableProps<Row>) {
  if (rows.length === 0 && empty !== undefined) return <Empty>{empty}</Empty>;
  return (
    <div class="table-wrap">
      <table>
        <thead>
          <tr>
            {head.map((heading) => (
              <th scope="col">{heading}</th>
            ))}
          </tr>
        </thead>
        <tbody>{rows.map((value, index) => row(value, index))}</tbody>
      </table>
    </div>
  );
}
