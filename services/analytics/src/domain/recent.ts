/**
 * The last value seen per key, for at most `capacity` keys: the least
 * recently written one makes room. Guesses for the next read, never answers.
 */
export class RecentValues<V> {
  private readonly values = new Map<string, V>();

  constructor(private readonly capacity: number) {}

  get(key: string): V | undefined {
    return this.values.get(key);
  }

  set(key: string, value: V): void {
    this.values.delete(key);
    if (this.values.size >= this.capacity) this.values.delete(this.values.keys().next().value!);
    this.values.set(key, value);
  }
}
