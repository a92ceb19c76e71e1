/**
 * Properties (fast-check) of credits over random sequences of grants, finalized invoices
 * (allocation by apply.ts in the spend order of order.ts, then each application spent as the
 * store does: a conditional decrement, all of an invoice's spends in one transaction that rolls
 * back and is allocated again when one of them finds less than it needs), two finalizations
 * racing from one snapshot, expiries and voids. After every step: no grant's remaining leaves
 * [0, amount], the balance (sum of the ledger) is never negative and equals what the grants have
 * left, granted = applied + expired + voided + balance, and each allocation respected the order.
 */
import test, { type ExecutionContext } from "ava";
import fc from "fast-check";
import { type ChargeLine, allocateCredits } from "../../src/billing/credits/apply.js";
import { spendOrder } from "../../src/billing/credits/order.js";
import type { CreditApplication } from "../../src/billing/credits/types.js";

interface ModelGrant {
  id: string;
  amount: bigint;
  remaining: bigint;
  priority: number;
  expiresAt: Date | null;
  createdAt: Date;
  appliesToRateCodes: string[];
  status: "active" | "depleted" | "expired" | "voided";
}

type Entry = { type: "grant" | "application" | "expiry" | "void"; amount: bigint };

type Step =
  | { kind: "grant"; amount: number; priority: number; expiresIn: number | null; codes: string[] }
  | { kind: "invoice"; lines: [string, number][]; tax: number }
  | { kind: "race"; a: [string, number][]; b: [string, number][] }
  | { kind: "tick"; by: number }
  | { kind: "void"; pick: number };

const DAY = 86_400_000;
const CODES = ["api", "seats", "storage"];

class Book {
  grants: ModelGrant[] = [];
  ledger: Entry[] = [];
  now = Date.UTC(2026, 0, 1);

  spendable(): ModelGrant[] {
    return spendOrder(this.grants.filter((g) => g.status === "active" && g.remaining > 0n && (g.expiresAt === null || g.expiresAt.getTime() >= this.now)).map((g) => ({ ...g })));
  }

  /** The store's spend: remaining ≥ amount, else false (nothing changed). */
  spend(id: string, amount: bigint): boolean {
    const g = this.grants.find((x) => x.id === id);
    if (g?.status !== "active" || g.remaining < amount) return false;
    g.remaining -= amount;
    if (g.remaining === 0n) g.status = "depleted";
    this.ledger.push({ type: "application", amount: -amount });
    return true;
  }

  /** One finalization's spends in a transaction: all, or none (then false). */
  spendAll(apps: CreditApplication[]): boolean {
    const saved = { grants: this.grants.map((g) => ({ ...g })), ledger: [...this.ledger] };
    for (const a of apps) {
      if (!this.spend(a.grantId, BigInt(a.amount))) {
        this.grants = saved.grants;
        this.ledger = saved.ledger;
        return false;
      }
    }
    return true;
  }

  close(g: ModelGrant, how: "expiry" | "void"): void {
    if (g.remaining > 0n) this.ledger.push({ type: how, amount: -g.remaining });
    g.remaining = 0n;
    g.status = how === "void" ? "voided" : "expired";
  }
}

const lines = fc.array(fc.tuple(fc.constantFrom(...CODES), fc.integer({ min: 0, max: 1500 })), { minLength: 1, maxLength: 3 });
const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant("grant" as const),
    amount: fc.integer({ min: 1, max: 2000 }),
    priority: fc.integer({ min: 1, max: 4 }),
    expiresIn: fc.option(fc.integer({ min: 1, max: 20 }), { nil: null }),
    codes: fc.subarray(CODES, { maxLength: 2 }),
  }),
  fc.record({ kind: fc.constant("invoice" as const), lines, tax: fc.integer({ min: 0, max: 300 }) }),
  fc.record({ kind: fc.constant("race" as const), a: lines, b: lines }),
  fc.record({ kind: fc.constant("tick" as const), by: fc.integer({ min: 1, max: 6 }) }),
  fc.record({ kind: fc.constant("void" as const), pick: fc.nat() }),
);

/** The model's grants as the allocation reads them (remaining as decimal text). */
const applicable = (gs: ModelGrant[]) => gs.map((g) => ({ id: g.id, remaining: String(g.remaining), appliesToRateCodes: g.appliesToRateCodes }));
const chargeLines = (ls: [string, number][]): ChargeLine[] => ls.map(([rateCode, amount]) => ({ rateCode, amount: String(amount) }));
const totalOf = (ls: [string, number][], tax = 0) => String(ls.reduce((a, [, v]) => a + v, 0) + tax);

/** The order rule: a grant left with ≥ 1 after an allocation could pay nothing more of it. */
function orderRespected(ls: ChargeLine[], total: string, order: ModelGrant[], apps: CreditApplication[]): boolean {
  const got = new Map(apps.map((a) => [a.grantId, BigInt(a.amount)]));
  const applied = apps.reduce((a, x) => a + BigInt(x.amount), 0n);
  const totalLeft = BigInt(total) - applied;
  for (const [i, g] of order.entries()) {
    const rest = g.remaining - (got.get(g.id) ?? 0n);
    if (rest < 1n) continue;
    if (g.appliesToRateCodes.length === 0) {
      // Unrestricted with credit left: it took all that was left, nothing after it got anything.
      if (totalLeft > 0n || order.slice(i + 1).some((x) => got.has(x.id))) return false;
    } else {
      // Restricted with credit left: its lines were paid in full (by it or earlier restricted grants) or the total ran out.
      const own = ls.filter((l) => l.rateCode !== null && g.appliesToRateCodes.includes(l.rateCode)).reduce((a, l) => a + BigInt(l.amount), 0n);
      const restrictedBefore = order.slice(0, i + 1).filter((x) => x.appliesToRateCodes.some((c) => g.appliesToRateCodes.includes(c)));
      const paidOnOwn = restrictedBefore.reduce((a, x) => a + (got.get(x.id) ?? 0n), 0n);
      if (totalLeft > 0n && paidOnOwn < own && restrictedBefore.every((x) => x.appliesToRateCodes.every((c) => g.appliesToRateCodes.includes(c)))) return false;
    }
  }
  return applied <= BigInt(total < "0" ? "0" : total);
}

function finalize(book: Book, ls: [string, number][], tax: number): boolean {
  for (let attempt = 0; attempt < 3; attempt++) {
    const order = book.spendable();
    const cl = chargeLines(ls);
    const total = totalOf(ls, tax);
    const apps = allocateCredits(cl, total, applicable(order));
    if (!orderRespected(cl, total, order, apps)) return false;
    if (book.spendAll(apps)) return true;
  }
  return false;
}

function invariants(book: Book): boolean {
  const sum = (type: Entry["type"]) => book.ledger.filter((e) => e.type === type).reduce((a, e) => a + e.amount, 0n);
  const balance = book.ledger.reduce((a, e) => a + e.amount, 0n);
  const left = book.grants.filter((g) => g.status === "active" || g.status === "depleted").reduce((a, g) => a + g.remaining, 0n);
  return book.grants.every((g) => g.remaining >= 0n && g.remaining <= g.amount) && balance >= 0n && balance === left && sum("grant") === -sum("application") - sum("expiry") - sum("void") + balance;
}

function run(steps: Step[]): boolean {
  const book = new Book();
  let n = 0;
  for (const s of steps) {
    if (s.kind === "grant") {
      const amount = BigInt(s.amount);
      book.grants.push({
        id: `g${n++}`,
        amount,
        remaining: amount,
        priority: s.priority,
        expiresAt: s.expiresIn === null ? null : new Date(book.now + s.expiresIn * DAY),
        createdAt: new Date(book.now),
        appliesToRateCodes: s.codes,
        status: "active",
      });
      book.ledger.push({ type: "grant", amount });
    } else if (s.kind === "invoice") {
      if (!finalize(book, s.lines, s.tax)) return false;
    } else if (s.kind === "race") {
      // Both allocated from one snapshot; the second's spends then find less and it allocates again.
      const snapshot = book.spendable();
      const first = allocateCredits(chargeLines(s.a), totalOf(s.a), applicable(snapshot));
      const second = allocateCredits(chargeLines(s.b), totalOf(s.b), applicable(snapshot));
      if (!book.spendAll(first)) return false;
      if (!book.spendAll(second) && !finalize(book, s.b, 0)) return false;
    } else if (s.kind === "tick") {
      book.now += s.by * DAY;
      for (const g of book.grants) if ((g.status === "active" || g.status === "depleted") && g.expiresAt && g.expiresAt.getTime() <= book.now && g.remaining > 0n) book.close(g, "expiry");
    } else if (book.grants.length > 0) {
      const g = book.grants[s.pick % book.grants.length] as ModelGrant;
      if (g.status === "active" || g.status === "depleted") book.close(g, "void");
    }
    if (!invariants(book)) return false;
  }
  return true;
}

function holds(t: ExecutionContext, property: fc.IProperty<unknown>, numRuns = 500): void {
  t.notThrows(() => fc.assert(property, { numRuns }));
}

test("over random grants, finalizations, races, expiries and voids: the balance never goes negative, the ledger adds up, the order holds", (t) => {
  holds(
    t,
    fc.property(fc.array(step, { maxLength: 40 }), (steps) => run(steps)),
  );
});

test("an allocation never exceeds the total, a grant's remaining, or (restricted) its lines", (t) => {
  const grant = fc.record({
    id: fc.uuid(),
    remaining: fc.bigInt({ min: 0n, max: 10n ** 22n }).map(String),
    appliesToRateCodes: fc.subarray(CODES, { maxLength: 2 }),
  });
  holds(
    t,
    fc.property(lines, fc.integer({ min: -500, max: 500 }), fc.uniqueArray(grant, { selector: (g) => g.id, maxLength: 6 }), (ls, adjust, grants) => {
      const cl = chargeLines(ls);
      const total = String(BigInt(totalOf(ls)) + BigInt(adjust));
      const apps = allocateCredits(cl, total, grants);
      const applied = apps.reduce((a, x) => a + BigInt(x.amount), 0n);
      if (applied > (BigInt(total) > 0n ? BigInt(total) : 0n)) return false;
      for (const a of apps) {
        const g = grants.find((x) => x.id === a.grantId);
        if (!g || BigInt(a.amount) <= 0n || BigInt(a.amount) > BigInt(g.remaining)) return false;
        if (g.appliesToRateCodes.length > 0) {
          const own = ls.filter(([c]) => g.appliesToRateCodes.includes(c)).reduce((s, [, v]) => s + BigInt(v), 0n);
          if (BigInt(a.amount) > own) return false;
        }
      }
      return true;
    }),
  );
});
