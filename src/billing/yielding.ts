/**
 * Long work in steps that let the server breathe. On the embedded store every query runs
 * synchronously, so a loop of awaited queries never returns to the event loop: a test clock
 * advanced over thousands of cycles held every other request (even /ping) for seconds. A
 * `Yielder` is called between steps (never inside a transaction) and, once the work has held the
 * event loop for `sliceMs`, waits one turn of it so that I/O and timers run.
 */
export type Yielder = () => Promise<void>;

export function yielder(sliceMs = 20): Yielder {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await nextTurn();
    since = performance.now();
  };
}

/** One turn of the event loop: timers and I/O that are due run before the caller goes on. */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resolve));
}
