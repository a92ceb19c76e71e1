/**
 * Group commit: submissions that arrive while a commit is running wait and go together in the
 * next one, so many small concurrent requests share a transaction (and its durable flush). A
 * lone request commits at once; nothing waits on a timer.
 */
export class GroupCommit<T, R> {
  private queue: { items: T[]; resolve: (r: R[]) => void; reject: (e: unknown) => void }[] = [];
  private inFlight = 0;

  constructor(
    private readonly flush: (items: T[]) => Promise<R[]>,
    private readonly maxItems: number,
    private readonly maxInFlight: number,
  ) {}

  submit(items: T[]): Promise<R[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ items, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const group: typeof this.queue = [];
      let size = 0;
      while (this.queue.length > 0) {
        const next = this.queue[0] as (typeof this.queue)[number];
        if (group.length > 0 && size + next.items.length > this.maxItems) break;
        group.push(next);
        size += next.items.length;
        this.queue.shift();
      }
      this.inFlight++;
      const items = group.flatMap((g) => g.items);
      this.flush(items)
        .then(
          (results) => {
            let at = 0;
            for (const g of group) {
              g.resolve(results.slice(at, at + g.items.length));
              at += g.items.length;
            }
          },
          (err) => {
            for (const g of group) g.reject(err);
          },
        )
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }
}
