/**
 * A stand-in for the resource a lock protects (a database row, a bucket).
 * A lease can end while its holder is paused (GC, a slow network, a
 * suspended VM) and another client takes the lock; the old holder then
 * wakes up and writes. The lock alone cannot stop that write: the resource
 * must refuse any fencing token lower than one it has already seen.
 *
 * Fencing tokens are int64 on the wire; JSON.parse gives numbers, exact up
 * to 2^53, which is plenty for a counter that grows by one per acquisition.
 */
export class FencedStore {
  private highest = 0;
  private readonly values = new Map<string, string>();

  /** Stores value under key, unless fence is older than one seen before. */
  write(fence: number, key: string, value: string): void {
    if (fence < this.highest) {
      throw new StaleFenceError(fence, this.highest);
    }
    this.highest = fence;
    this.values.set(key, value);
  }

  read(key: string): string | undefined {
    return this.values.get(key);
  }
}

export class StaleFenceError extends Error {
  constructor(readonly fence: number, readonly highest: number) {
    super(`stale fencing token ${fence}: ${highest} has been seen`);
  }
}
