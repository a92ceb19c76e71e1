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

/**
 * How long work resumed by nextTurn may run in one turn of the event loop, all callers together.
 * Each caller yields between its own steps, but thirty-two 1,000-event batches yielding at once
 * resumed in the same turn one after the other and held the loop for 50-120 ms of CPU.
 */
export const TURN_SLICE_MS = 10;

/** When the current slice began, and its number: callers put off to a later turn start the next. */
let sliceStart = Number.NEGATIVE_INFINITY;
let slice = 0;

/**
 * One turn of the event loop: timers and I/O that are due run before the caller goes on. Callers
 * that resume once TURN_SLICE_MS of yielded work has run in this turn are put off to the next
 * turn, where the first of them starts a new slice: yielded work takes turns with the
 * rest of the server, a slice at a time, however many callers there are.
 */
export function nextTurn(): Promise<void> {
  return new Promise<void>((resolve) => setImmediate(resumeInSlice, resolve, -1));
}

function resumeInSlice(resolve: () => void, putOffIn: number): void {
  const now = performance.now();
  if (putOffIn === slice) {
    // The first caller put off in that slice to run: a new turn, a new slice.
    slice++;
    sliceStart = now;
    resolve();
    return;
  }
  if (now - sliceStart <= TURN_SLICE_MS) {
    resolve();
    return;
  }
  // A turn later: immediates queued now run in the next turn's check phase, after its timers and I/O.
  setImmediate(resumeInSlice, resolve, slice);
}
