/** Group commit, with a fake commit: what goes together, in what order, and what a failure takes down. */
import test from "ava";
import { GroupCommit } from "../../src/billing/metering/group-commit.js";

/**
 * A commit that echoes its items upper-cased, records each call's items, fails any call that
 * `fails` says should, and holds the first call until `release()` so that later submissions queue.
 */
function fakeCommit(fails: (items: string[], call: number) => boolean, onCall: (call: number) => void = () => {}) {
  const calls: string[][] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const flush = async (items: string[]) => {
    const call = calls.length;
    calls.push(items);
    onCall(call);
    if (call === 0) await gate;
    await new Promise((r) => setImmediate(r));
    if (fails(items, call)) throw new Error(`commit ${call} failed${items.includes("down") ? " (database down)" : ""}`);
    return items.map((i) => i.toUpperCase());
  };
  return { calls, flush, release };
}

type Outcome = string[] | string;
const settle = (p: Promise<string[]>): Promise<Outcome> =>
  p.then(
    (r) => r,
    (e: Error) => `error: ${e.message}`,
  );

const cases: {
  title: string;
  maxItems: number;
  maxInFlight: number;
  /** Submitted in order while the first commit is held. */
  submissions: string[][];
  /** Submitted when the commit of that number starts. */
  arriving?: { atCall: number; items: string[] }[];
  fails: (items: string[], call: number) => boolean;
  calls: string[][];
  outcomes: Outcome[];
}[] = [
  {
    title: "what arrives during a commit goes together in the next one",
    maxItems: 100,
    maxInFlight: 1,
    submissions: [["a"], ["b"], ["c", "d"], ["e"]],
    fails: () => false,
    calls: [["a"], ["b", "c", "d", "e"]],
    outcomes: [["A"], ["B"], ["C", "D"], ["E"]],
  },
  {
    title: "a group never exceeds maxItems; a submission is never split",
    maxItems: 3,
    maxInFlight: 1,
    submissions: [["a"], ["b", "c"], ["d", "e"], ["f"]],
    fails: () => false,
    calls: [["a"], ["b", "c"], ["d", "e", "f"]],
    outcomes: [["A"], ["B", "C"], ["D", "E"], ["F"]],
  },
  {
    title: "two commits in flight: the second starts while the first is held",
    maxItems: 100,
    maxInFlight: 2,
    submissions: [["a"], ["b"], ["c"]],
    fails: () => false,
    calls: [["a"], ["b"], ["c"]],
    outcomes: [["A"], ["B"], ["C"]],
  },
  {
    title: "a shared commit that fails is retried one submission at a time: only the culprit fails",
    maxItems: 100,
    maxInFlight: 1,
    submissions: [["a"], ["b"], ["poison", "c"], ["d"]],
    fails: (items) => items.includes("poison"),
    calls: [["a"], ["b", "poison", "c", "d"], ["b"], ["poison", "c"], ["d"]],
    outcomes: [["A"], ["B"], "error: commit 3 failed", ["D"]],
  },
  {
    title: "a transient failure of a shared commit: every submission commits on its retry",
    maxItems: 100,
    maxInFlight: 1,
    submissions: [["a"], ["b"], ["c"]],
    fails: (_items, call) => call === 1,
    calls: [["a"], ["b", "c"], ["b"], ["c"]],
    outcomes: [["A"], ["B"], ["C"]],
  },
  {
    title: "a lone submission that fails is not retried",
    maxItems: 100,
    maxInFlight: 1,
    submissions: [["a"], ["poison"]],
    fails: (items) => items.includes("poison"),
    calls: [["a"], ["poison"]],
    outcomes: [["A"], "error: commit 1 failed"],
  },
  {
    title: "retried submissions go before what arrived meanwhile, each alone",
    maxItems: 100,
    maxInFlight: 1,
    submissions: [["a"], ["poison"], ["b"]],
    arriving: [{ atCall: 1, items: ["c"] }],
    fails: (items) => items.includes("poison"),
    calls: [["a"], ["poison", "b"], ["poison"], ["b"], ["c"]],
    outcomes: [["A"], "error: commit 2 failed", ["B"], ["C"]],
  },
  {
    title: "two in flight: a failing group is retried alone while the other commit runs",
    maxItems: 100,
    maxInFlight: 2,
    submissions: [["a"], ["b"], ["poison"], ["c"]],
    fails: (items) => items.includes("poison"),
    calls: [["a"], ["b"], ["poison", "c"], ["poison"], ["c"]],
    outcomes: [["A"], ["B"], "error: commit 3 failed", ["C"]],
  },
  {
    title: "a failure that is not about the data (the database down) answers the whole group at once",
    maxItems: 100,
    maxInFlight: 1,
    submissions: [["a"], ["b"], ["down"]],
    fails: (items) => items.includes("down"),
    calls: [["a"], ["b", "down"]],
    outcomes: [["A"], "error: commit 1 failed (database down)", "error: commit 1 failed (database down)"],
  },
  {
    title: "the database unreachable: the submissions waiting for a commit of their own hear it too, without a commit each",
    maxItems: 1,
    maxInFlight: 1,
    submissions: [["down"], ["b"], ["c"]],
    fails: (items) => items.includes("down"),
    calls: [["down"]],
    outcomes: ["error: commit 0 failed (database down)", "error: commit 0 failed (database down)", "error: commit 0 failed (database down)"],
  },
];

for (const c of cases) {
  test(c.title, async (t) => {
    const pending: Promise<Outcome>[] = [];
    const fake = fakeCommit(c.fails, (call) => {
      for (const a of c.arriving ?? []) if (a.atCall === call) pending.push(settle(gc.submit(a.items)));
    });
    // The database refused a value, unless it is down (unreachable).
    const down = (err: unknown) => String(err).includes("database down");
    const gc = new GroupCommit<string, string>(fake.flush, c.maxItems, c.maxInFlight, (err) => !down(err), undefined, down);
    pending.unshift(...c.submissions.map((items) => settle(gc.submit(items))));
    fake.release();
    await Promise.all(pending); // arrivals join `pending` while these run
    t.deepEqual(await Promise.all(pending), c.outcomes);
    t.deepEqual(fake.calls, c.calls);
  });
}
