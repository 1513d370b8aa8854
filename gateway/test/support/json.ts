/**
 * A parsed JSON answer of the API. The tests read it freely and their
 * assertions (toEqual, toMatchObject) check its shape, so it has no static type.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the shape of an answer is what a test asserts, not what it assumes
export type Json = any;

export type JsonObject = Record<string, Json>;
