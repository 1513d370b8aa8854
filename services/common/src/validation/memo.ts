/**
 * Remembers the answers of a pure check of a string (same input, same
 * answer), so a campaign saved again with the same query or schedule is not
 * parsed again: parsing is not cheap (bench/README.md, "Campaign and
 * Postgres"). Bounded: forgets everything once full.
 */
export function memoized<T>(check: (input: string) => T, maxEntries = 1_000): (input: string) => T {
  const answers = new Map<string, T>();
  return (input) => {
    if (answers.has(input)) return answers.get(input) as T;
    const answer = check(input);
    if (answers.size >= maxEntries) answers.clear();
    answers.set(input, answer);
    return answer;
  };
}
