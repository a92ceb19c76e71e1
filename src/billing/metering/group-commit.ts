/**
 * Group commit: submissions that arrive while a commit is running wait and go together in the
 * next one, so many small concurrent requests share a transaction (and its durable flush). A
 * lone request commits at once; nothing waits on a timer.
 *
 * A shared commit that fails because of what it carried (`isolate` says so: the database refused
 * a value) is retried one submission at a time before anyone is told, so that the submission
 * that made it fail fails alone and its neighbours' events are committed, not lost with it.
 * Idempotency makes the retry safe: the failed commit wrote nothing. Any other failure (the
 * database unreachable or busy) is everyone's answer at once: retrying each would only make N
 * callers wait N times as long. A database that is unreachable (`unreachable` says so: it did
 * not answer within its time limit, or refused) is also the answer of the submissions waiting
 * for a commit of their own: they would only wait as long again for the same answer, and a
 * caller hears `unavailable` within the time limit of one commit, not of several in a row.
 */
interface Submission<T, R> {
  items: T[];
  resolve: (r: R[]) => void;
  reject: (e: unknown) => void;
  /** Retried after a shared commit failed: commits on its own. */
  alone: boolean;
}

export class GroupCommit<T, R> {
  private queue: Submission<T, R>[] = [];
  private inFlight = 0;

  constructor(
    private readonly flush: (items: T[]) => Promise<R[]>,
    private readonly maxItems: number,
    private readonly maxInFlight: number,
    private readonly isolate: (err: unknown) => boolean = () => true,
    /** Told of each commit that succeeded: its items, the submissions sharing it, and how long it took (ms). */
    private readonly committed?: (items: number, submissions: number, ms: number) => void,
    private readonly unreachable: (err: unknown) => boolean = () => false,
  ) {}

  submit(items: T[]): Promise<R[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ items, resolve, reject, alone: false });
      this.pump();
    });
  }

  /** The next group: the queue's head, and the submissions after it while they fit (never an `alone` one). */
  private take(): Submission<T, R>[] {
    const group = [this.queue.shift() as Submission<T, R>];
    let size = group[0]?.items.length ?? 0;
    if (group[0]?.alone) return group;
    while (this.queue.length > 0) {
      const next = this.queue[0] as Submission<T, R>;
      if (next.alone || size + next.items.length > this.maxItems) break;
      group.push(next);
      size += next.items.length;
      this.queue.shift();
    }
    return group;
  }

  private pump(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const group = this.take();
      this.inFlight++;
      const items = group.flatMap((g) => g.items);
      const started = this.committed ? performance.now() : 0;
      this.flush(items)
        .then(
          (results) => {
            this.committed?.(items.length, group.length, performance.now() - started);
            let at = 0;
            for (const g of group) {
              g.resolve(results.slice(at, at + g.items.length));
              at += g.items.length;
            }
          },
          (err) => {
            if (group.length === 1 || !this.isolate(err)) {
              for (const g of group) g.reject(err);
              if (this.unreachable(err)) for (const g of this.queue.splice(0)) g.reject(err);
              return;
            }
            // Each on its own, first in line, in their order.
            this.queue.unshift(...group.map((g) => ({ ...g, alone: true })));
          },
        )
        .finally(() => {
          this.inFlight--;
          this.pump();
        });
    }
  }
}
