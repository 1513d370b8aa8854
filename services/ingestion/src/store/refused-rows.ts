import { clickHouseErrorCode } from '@mail/event-store';

/**
 * ClickHouse's errors for data it cannot take (a value it cannot parse, or
 * outside its type): the rows are at fault. Any other failure (the server down,
 * unreachable or timing out, a table missing) is the server's, and the batch is
 * retried as it is. (18.16 refuses an unknown Enum member as a LOGICAL_ERROR,
 * which is not taken for the rows' fault: checkRows keeps such rows out.)
 */
const ROW_ERROR_CODES = new Set([
  '6', // CANNOT_PARSE_TEXT
  '25', // CANNOT_PARSE_ESCAPE_SEQUENCE
  '26', // CANNOT_PARSE_QUOTED_STRING
  '27', // CANNOT_PARSE_INPUT_ASSERTION_FAILED
  '38', // CANNOT_PARSE_DATE
  '41', // CANNOT_PARSE_DATETIME
  '53', // TYPE_MISMATCH
  '69', // ARGUMENT_OUT_OF_BOUND
  '70', // CANNOT_CONVERT_TYPE
  '72', // CANNOT_PARSE_NUMBER
  '117', // INCORRECT_DATA
  '128', // TOO_LARGE_ARRAY_SIZE
  '130', // CANNOT_READ_ARRAY_FROM_TEXT
  '131', // TOO_LARGE_STRING_SIZE
  '321', // VALUE_IS_OUT_OF_RANGE_OF_DATA_TYPE
  '349', // CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
  '376', // CANNOT_PARSE_UUID
  '691', // UNKNOWN_ELEMENT_OF_ENUM
]);

/** True when ClickHouse refused an insert for something in its rows. */
export function rowsAtFault(error: unknown): boolean {
  return ROW_ERROR_CODES.has(clickHouseErrorCode(error) ?? '');
}

/** ClickHouse's message shows the row it stopped at: enough of it to tell what went wrong. */
const MAX_REASON_CHARS = 1_000;

/** An item whose row ClickHouse refused on its own, and its message. */
export interface Refusal<Item> {
  item: Item;
  reason: string;
}

export interface IsolatedInsert<Item> {
  refused: Refusal<Item>[];
  /** The first insert failed: ClickHouse may have written some rows before it failed. */
  failed: boolean;
}

/**
 * Inserts the items' rows; when ClickHouse refuses the insert for something
 * in its rows, inserts each half apart, and so on down to single rows, so
 * that only the rows refused on their own are left out (found in about
 * log2(items) inserts each). Any other failure throws: the batch is retried.
 */
export async function insertIsolating<Item>(items: Item[], insert: (items: Item[]) => Promise<void>): Promise<IsolatedInsert<Item>> {
  const refused: Refusal<Item>[] = [];
  const attempt = async (part: Item[]): Promise<boolean> => {
    try {
      await insert(part);
      return true;
    } catch (error) {
      if (!rowsAtFault(error)) throw error;
      if (part.length === 1) {
        // 18.16 pads its description of the row with runs of spaces.
        const message = (error instanceof Error ? error.message : String(error)).replace(/\s+/g, ' ');
        const code = clickHouseErrorCode(error)!;
        refused.push({ item: part[0], reason: `ClickHouse refused the row (error ${code}): ${message.slice(0, MAX_REASON_CHARS)}` });
        return false;
      }
      const half = Math.ceil(part.length / 2);
      await attempt(part.slice(0, half));
      await attempt(part.slice(half));
      return false;
    }
  };
  if (items.length === 0) return { refused, failed: false };
  const failed = !(await attempt(items));
  return { refused, failed };
}
