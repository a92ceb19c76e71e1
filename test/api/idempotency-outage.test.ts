/**
 * Idempotent writes (DESIGN §12) across a moment's database outage, with the real server on a port,
 * on both stores: when the database refuses the write of a call's outcome (or of its key's
 * release), the server writes it again once the database takes it, so a retry with the same key
 * gets the stored answer (or runs) within seconds, rather than 409 IDEMPOTENCY_KEY_IN_USE until
 * the key's 5-minute lease ends and then IDEMPOTENCY_OUTCOME_LOST. A trigger refuses the one
 * write, as a failover or a proxy restarted at that moment would (serial: a trigger refuses it for
 * every call on the server).
 */
import test from "ava";
import { STORES, withDatabase } from "../helpers/db.js";
import { useServers } from "../helpers/server.js";

interface Answer {
  status: number;
  text: string;
  replayed: string | null;
}

async function createSubject(url: string, key: string, idempotencyKey: string, name: string): Promise<Answer> {
  const res = await fetch(`${url}/subjects`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "application/json", "idempotency-key": idempotencyKey },
    body: JSON.stringify({ name }),
  });
  return { status: res.status, text: await res.text(), replayed: res.headers.get("idempotent-replayed") };
}

/** Sends the call again while it is answered 409 (the key in use), at most `tries` times; the first other answer. */
async function retryWhileInUse(send: () => Promise<Answer>, tries = 15): Promise<Answer> {
  let last = await send();
  for (let i = 1; i < tries && last.status === 409; i++) last = await send();
  return last;
}

const refuse = (store: string, name: string, event: "UPDATE" | "DELETE" | "INSERT", table: string, when = "1 = 1") =>
  store === "mysql"
    ? `CREATE TRIGGER ${name} BEFORE ${event} ON ${table} FOR EACH ROW BEGIN IF ${when} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; END IF; END`
    : `CREATE TRIGGER ${name} BEFORE ${event} ON ${table} WHEN ${when} BEGIN SELECT RAISE(ABORT, 'refused'); END`;

async function subjectsNamed(url: string, name: string): Promise<number> {
  return withDatabase(url, async (db) => ((await db.dataSource.query("SELECT id FROM subjects WHERE name = ?", [name])) as unknown[]).length);
}

const serverOf = useServers();

for (const store of STORES) {
  test.serial(`${store}: a success whose outcome the database refused is replayed once the database takes it, made once`, async (t) => {
    const server = serverOf(store);
    const key = await server.freshKey();
    const name = `outage-done-${store}`;
    await withDatabase(server.db.url, (db) => db.dataSource.query(refuse(store, "refuse_outcomes", "UPDATE", "idempotency_keys", "NEW.state = 'done'")));
    let first: Answer;
    let meanwhile: Answer;
    try {
      first = await createSubject(server.url, key, "outage-done", name);
      t.is(first.status, 200, first.text);
      // The change is made, its answer not stored: a retry now waits for it (IN_USE).
      meanwhile = await createSubject(server.url, key, "outage-done", name);
    } finally {
      await withDatabase(server.db.url, (db) => db.dataSource.query("DROP TRIGGER refuse_outcomes"));
    }
    t.is(meanwhile.status, 409, meanwhile.text);
    t.is(JSON.parse(meanwhile.text).details?.[0]?.debug?.reason, "IDEMPOTENCY_KEY_IN_USE");
    const again = await retryWhileInUse(() => createSubject(server.url, key, "outage-done", name));
    t.deepEqual([again.status, again.replayed, again.text], [200, "true", first.text], "the retry gets the first answer, replayed");
    t.is(await subjectsNamed(server.db.url, name), 1, "one subject made");
  });

  test.serial(`${store}: a failure whose key's release the database refused lets the retry run once the database takes it`, async (t) => {
    const server = serverOf(store);
    const key = await server.freshKey();
    const name = `outage-release-${store}`;
    await withDatabase(server.db.url, async (db) => {
      await db.dataSource.query(refuse(store, "refuse_subjects", "INSERT", "subjects"));
      await db.dataSource.query(refuse(store, "refuse_release", "DELETE", "idempotency_keys"));
    });
    let first: Answer;
    try {
      first = await createSubject(server.url, key, "outage-release", name);
    } finally {
      await withDatabase(server.db.url, async (db) => {
        await db.dataSource.query("DROP TRIGGER refuse_subjects");
        await db.dataSource.query("DROP TRIGGER refuse_release");
      });
    }
    t.true(first.status >= 500, `the first call failed on the database: ${first.status} ${first.text}`);
    const again = await retryWhileInUse(() => createSubject(server.url, key, "outage-release", name));
    t.deepEqual([again.status, again.replayed], [200, null], again.text);
    t.is(await subjectsNamed(server.db.url, name), 1, "one subject made, by the retry");
  });
}
