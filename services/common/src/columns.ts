/**
 * A record's camelCase fields mapped to their snake_case columns, declared
 * once per store: what a select, a RETURNING and an update of the record say.
 */
export interface RecordColumns<Fields> {
  /** knex select list: the id, every field under its own name, and the two timestamps. */
  select: string[];
  /** The same, as a RETURNING clause of raw SQL. */
  returning: string;
  /** A patch of fields as the columns knex updates. */
  toColumns(fields: Partial<Fields>): Record<string, unknown>;
}

export function recordColumns<Fields>(columnOf: Record<keyof Fields & string, string>): RecordColumns<Fields> {
  const entries = Object.entries<string>(columnOf);
  return {
    select: ['id', ...entries.map(([field, column]) => `${column} as ${field}`), 'created_at as createdAt', 'updated_at as updatedAt'],
    returning: `id, ${entries.map(([field, column]) => `${column} AS "${field}"`).join(', ')},
    created_at AS "createdAt", updated_at AS "updatedAt"`,
    toColumns: (fields) =>
      Object.fromEntries(Object.entries(fields).map(([field, value]) => [columnOf[field as keyof Fields & string], value])),
  };
}
