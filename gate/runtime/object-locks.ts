// Locks per object, each named by its namespace/name (or another name), shared by the sends (one
// Revision's actions and its answers), the caches (one list at a time) and the image drift check.
/** One async lock per name: what runs under a name's lock runs alone, in the order it asked. */
export class ObjectLocks {
  private readonly tails = new Map<string, Promise<void>>();

  async exclusive<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    let release: () => void = () => undefined;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = before.then(() => mine);
    this.tails.set(key, tail);
    await before;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
