export type D1Usage = { roundTrips: number; statements: number; rowsChanged: number; rowsWritten: number; queries: string[] };

/**
 * The real binding, counting what is asked of it: round trips, statements and the rows D1 reports written; `queries`
 * keeps the text of every statement prepared, so a test can tell which tables a path writes. Several bindings given
 * the same `usage` are counted together (a path that reaches the directory in `DB` and an account database).
 */
export function countingD1(d1: D1Database, usage: D1Usage = { roundTrips: 0, statements: 0, rowsChanged: 0, rowsWritten: 0, queries: [] }) {
  const roundTrip = <T>(run: () => T): T => {
    usage.roundTrips += 1;
    return run();
  };
  const counted: D1Database = Object.create(d1, {
    batch: {
      value: async (statements: D1PreparedStatement[]) => {
        usage.roundTrips += 1;
        usage.statements += statements.length;
        const results = await d1.batch(statements);
        for (const result of results) {
          usage.rowsChanged += result.meta.changes ?? 0;
          usage.rowsWritten += result.meta.rows_written ?? 0;
        }
        return results;
      },
    },
    // A statement run on its own is a round trip too; wrap them so one slipping into the path is counted.
    prepare: {
      value: (query: string) => {
        usage.queries.push(query);
        const counting = (statement: D1PreparedStatement): D1PreparedStatement =>
          Object.create(statement, {
            bind: { value: (...values: unknown[]) => counting(statement.bind(...values)) },
            first: { value: (...args: [string?]) => roundTrip(() => statement.first(...(args as []))) },
            run: { value: () => roundTrip(() => statement.run()) },
            all: { value: () => roundTrip(() => statement.all()) },
            raw: { value: () => roundTrip(() => statement.raw()) },
          });
        return counting(d1.prepare(query));
      },
    },
  });
  return { counted, usage };
}
