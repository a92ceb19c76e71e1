/**
 * Subject lookups made in one turn of the event loop go to the database together
 * (SqlSubjectStore.findByIdOrExternalId), on both stores: every caller gets what a lookup of its
 * key alone would give (a live subject's ID first, then an external ID, per environment), the
 * batch takes a handful of queries whatever its size, and what fails one key fails it alone.
 * Lookups made while a batch is in flight wait for its answer and then go together.
 */
import test from "ava";
import type { EventEncoder } from "../../src/billing/events/types.js";
import { newId } from "../../src/billing/ids.js";
import type { Subject } from "../../src/billing/subject-types.js";
import { dbTime } from "../../src/db/raw.js";
import { SqlSubjectStore } from "../../src/db/stores/subject-store.js";
import { STORES, withMigratedDatabase } from "../helpers/db.js";

const noEvents = (() => {
  throw new Error("no events are written here");
}) as unknown as EventEncoder;

for (const store of STORES) {
  test(`${store}: 1,300 lookups in one turn, two environments, each answered as alone, in a few queries`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const subjects = new SqlSubjectStore(db.sql, db.entities, noEvents);
      const at = new Date("2026-11-01T00:00:00.000Z");
      const make = async (environmentId: string, externalId: string | null, metadata: Record<string, string> = {}) => {
        const s: Subject = { id: newId("subj"), environmentId, createdAt: at, email: null, externalId, metadata, name: externalId, testClockId: null, hasPaymentMethod: false };
        await subjects.insert(s, []);
        return s;
      };
      const envA = newId("env");
      const envB = newId("env");
      // More than 500 keys of each kind: the IN lists go in parts.
      const many: Subject[] = [];
      for (let i = 0; i < 600; i++) many.push(await make(envA, `a-${i}`, { i: String(i) }));
      const first = many[0] as Subject;
      // Another environment with the same external IDs.
      const inB: Subject[] = [];
      for (let i = 0; i < 10; i++) inB.push(await make(envB, `a-${i}`));
      // One subject's ID is another's external ID: the ID match wins.
      const twin = await make(envA, first.id);
      // An external ID shaped like an ID, which is no subject's ID.
      const idShaped = await make(envA, `subj_${"z".repeat(22)}`);
      // A deleted subject (its external ID freed, as delete does).
      const gone = await make(envA, "gone");
      await db.sql.query("UPDATE subjects SET deleted_at = ?, external_id_key = NULL WHERE id = ?", [dbTime(at), gone.id]);
      // A row that cannot be read: its lookups fail, and only its.
      const broken = await make(envA, "broken");
      await db.sql.query("UPDATE subjects SET metadata = ? WHERE id = ?", ["{not json", broken.id]);

      const cases: [env: string, key: string, expected: Subject | undefined | "error"][] = [
        ...many.flatMap((s): [string, string, Subject][] => [
          [envA, s.id, s],
          [envA, s.externalId as string, s],
        ]),
        ...inB.map((s): [string, string, Subject] => [envB, s.externalId as string, s]),
        [envB, first.id, undefined],
        [envA, (inB[0] as Subject).id, undefined],
        [envA, first.id, first],
        [envA, twin.id, twin],
        [envA, idShaped.externalId as string, idShaped],
        [envA, gone.id, undefined],
        [envA, "gone", undefined],
        [envA, broken.id, "error"],
        [envA, "broken", "error"],
        [envA, "nobody", undefined],
        [envA, `subj_${"q".repeat(22)}`, undefined],
        // Keys too long to be any subject's: answered none, without failing their neighbours.
        ...Array.from({ length: 80 }, (_, i): [string, string, undefined] => [envA, `${i}${"x".repeat(250_000)}`, undefined]),
        [envA, `subj_${"y".repeat(250_000)}`, undefined],
      ];
      // Every case twice, all in one turn.
      const calls = [...cases, ...cases];
      const realQuery = db.sql.query.bind(db.sql);
      let queries = 0;
      db.sql.query = ((sql: string, params: readonly unknown[]) => {
        queries++;
        return realQuery(sql, params);
      }) as typeof db.sql.query;
      const answers = await Promise.allSettled(calls.map(([env, key]) => subjects.findByIdOrExternalId(env, key)));
      db.sql.query = realQuery;

      let wrong = 0;
      calls.forEach(([env, key, expected], i) => {
        const a = answers[i] as PromiseSettledResult<Subject | undefined>;
        const got = a.status === "rejected" ? "error" : a.value;
        const ok = expected === "error" || expected === undefined ? got === expected : got !== "error" && got?.id === expected.id && got.environmentId === env;
        if (!ok && wrong++ < 5) t.fail(`${env} ${key.slice(0, 40)}: expected ${expected === "error" || !expected ? expected : expected.id}, got ${got === "error" || !got ? got : got.id}`);
      });
      t.is(wrong, 0, "every lookup answered as alone");
      const found = answers.filter((a): a is PromiseFulfilledResult<Subject> => a.status === "fulfilled" && a.value !== undefined);
      t.deepEqual(found.find((a) => a.value.id === first.id)?.value.metadata, { i: "0" });
      // Callers of the same key get their own objects.
      const sameKey = found.filter((a) => a.value.id === twin.id).map((a) => a.value);
      t.is(sameKey.length, 2);
      t.deepEqual(sameKey[0], sameKey[1]);
      t.not(sameKey[0], sameKey[1]);
      // By ID in parts of 500 and by external ID in parts of 500, per environment: a handful,
      // where 2,600 lookups one by one would have been 2,600 queries or more.
      t.true(queries <= 8, `${queries} queries`);
    });
  });
}

for (const store of STORES) {
  test(`${store}: lookups made while a batch is in flight wait for it and go together in the next, even when it failed`, async (t) => {
    await withMigratedDatabase(store, async (db) => {
      const subjects = new SqlSubjectStore(db.sql, db.entities, noEvents);
      const environmentId = newId("env");
      const made: Subject[] = [];
      for (let i = 0; i < 31; i++) {
        const s: Subject = {
          id: newId("subj"),
          environmentId,
          createdAt: new Date("2026-11-01T00:00:00.000Z"),
          email: null,
          externalId: `w-${i}`,
          metadata: {},
          name: null,
          testClockId: null,
          hasPaymentMethod: false,
        };
        await subjects.insert(s, []);
        made.push(s);
      }
      // The first batch's query waits until released, then fails.
      const realQuery = db.sql.query.bind(db.sql);
      const sent: number[] = [];
      let release: () => void = () => undefined;
      const held = new Promise<void>((r) => (release = r));
      db.sql.query = ((sql: string, params: readonly unknown[]) => {
        sent.push(params.length - 1);
        if (sent.length === 1) return held.then(() => Promise.reject(new Error("the database went away")));
        return realQuery(sql, params);
      }) as typeof db.sql.query;
      const first = subjects.findByIdOrExternalId(environmentId, (made[0] as Subject).id);
      // Thirty lookups, three per turn over ten turns, while the first batch is in flight.
      const later: Promise<Subject | undefined>[] = [];
      for (let turn = 0; turn < 10; turn++) {
        await new Promise((r) => setImmediate(r));
        for (let j = 0; j < 3; j++) later.push(subjects.findByIdOrExternalId(environmentId, (made[1 + turn * 3 + j] as Subject).id));
      }
      t.deepEqual(sent, [1], "nothing else is sent while the first batch is in flight");
      release();
      await t.throwsAsync(first, { message: "the database went away" });
      const answers = await Promise.all(later);
      db.sql.query = realQuery;
      t.deepEqual(
        answers.map((s) => s?.id),
        made.slice(1).map((s) => s.id),
      );
      t.deepEqual(sent, [1, 30], "the thirty went as one batch (all found by ID: no external-ID query)");
    });
  });
}
