/**
 * Migrations and entities agree: an empty database migrated up has nothing left for TypeORM's
 * schema diff (what `migration:generate` would write); down then up again gives the same.
 * Also: decimal columns round-trip exactly on both stores.
 */
import test from "ava";
import { createDatabase } from "../../src/db/datasource.js";
import { STORES, createTestDatabase, withMigratedDatabase } from "../helpers/db.js";
import { mysqlOnly } from "../helpers/mysql-only.js";

type Database = Awaited<ReturnType<typeof createDatabase>>;

/** Undoes the migrations after the one whose name starts with `name`, and that one too unless `keep`. */
async function undoBackTo(db: Database, name: string, keep = false): Promise<void> {
  const names = db.dataSource.migrations.map((m) => m.name ?? m.constructor.name);
  for (let i = names.length - 1; i >= 0 && !names[i]?.startsWith(name); i--) await db.dataSource.undoLastMigration({ transaction: "each" });
  if (!keep) await db.dataSource.undoLastMigration({ transaction: "each" });
}

for (const store of STORES) {
  test(`${store}: an empty database migrated up matches the entities; down then up again too`, async (t) => {
    const tdb = await createTestDatabase(store);
    const db = await createDatabase(tdb.url, { poolSize: 2 });
    await db.dataSource.initialize();
    try {
      const ran = await db.dataSource.runMigrations({ transaction: "each" });
      t.true(ran.length >= 1);
      const pending = async () => (await db.dataSource.driver.createSchemaBuilder().log()).upQueries.map((q) => q.query);
      t.deepEqual(await pending(), []);
      for (let i = 0; i < ran.length; i++) await db.dataSource.undoLastMigration({ transaction: "each" });
      t.true((await pending()).length > 0, "after down, the tables are gone");
      await db.dataSource.runMigrations({ transaction: "each" });
      t.deepEqual(await pending(), []);
    } finally {
      await db.dataSource.destroy();
      await tdb.drop();
    }
  });

  test(`${store}: decimal columns keep every digit and read back canonical`, async (t) => {
    const tdb = await createTestDatabase(store);
    const db = await createDatabase(tdb.url, { poolSize: 2 });
    await db.dataSource.initialize();
    const type = store === "mysql" ? "DECIMAL(38,12)" : "TEXT";
    try {
      await db.dataSource.query(`CREATE TABLE dec_probe (k INTEGER PRIMARY KEY, v ${type} NOT NULL)`);
      const { decimalTransformer } = await import("../../src/db/columns.js");
      const values = ["0.000001", "12345678901234567890.5", "2000", "-0.000000000001", "99999999999999999999999999.999999999999", "1.100000000000"];
      for (const [i, v] of values.entries()) {
        await db.dataSource.query("INSERT INTO dec_probe (k, v) VALUES (?, ?)", [i, decimalTransformer.to(v)]);
      }
      const rows: { k: number; v: unknown }[] = await db.dataSource.query("SELECT k, v FROM dec_probe ORDER BY k");
      t.deepEqual(
        rows.map((r) => decimalTransformer.from(r.v)),
        ["0.000001", "12345678901234567890.5", "2000", "-0.000000000001", "99999999999999999999999999.999999999999", "1.1"],
      );
    } finally {
      await db.dataSource.destroy();
      await tdb.drop();
    }
  });
}

mysqlOnly("mysql: every column that holds a sum is DECIMAL(65,12) and keeps 53 integer digits", async (t) => {
  await withMigratedDatabase("mysql", async (db) => {
    const rows: { t: string; c: string; type: string }[] = await db.dataSource.query(
      "SELECT table_name AS t, column_name AS c, column_type AS type FROM information_schema.columns WHERE table_schema = DATABASE() AND data_type = 'decimal' ORDER BY table_name, column_name",
    );
    const sums = [
      "carried_debits.amount",
      "checkout_sessions.amount_due",
      "credit_grants.amount",
      "credit_grants.remaining",
      "credit_ledger.amount",
      "credit_notes.subtotal",
      "credit_notes.total",
      "credit_notes.total_tax",
      "invoice_lines.amount",
      "invoice_lines.quantity",
      "invoice_lines.unit_amount",
      "invoices.amount_credited",
      "invoices.amount_due",
      "invoices.subtotal",
      "invoices.total",
      "invoices.total_discount",
      "invoices.total_tax",
      "usage_rollups.sum_value",
      "usage_rollups_minute.sum_value",
    ];
    for (const r of rows) t.is(r.type, sums.includes(`${r.t}.${r.c}`) ? "decimal(65,12)" : "decimal(38,12)", `${r.t}.${r.c}`);
    t.true(sums.every((name) => rows.some((r) => `${r.t}.${r.c}` === name)));
    const largest = `${"9".repeat(53)}.999999999999`;
    await db.dataSource.query("INSERT INTO invoice_lines (invoice_id, position, description, quantity, unit_amount, amount) VALUES ('inv_x', 0, 'x', ?, ?, ?)", [largest, largest, largest]);
    const [line] = await db.dataSource.query("SELECT amount FROM invoice_lines WHERE invoice_id = 'inv_x'");
    t.is(String(line.amount), largest);
  });
});

for (const store of STORES) {
  test(`${store}: the ledger migration moves a purchase refund's entry from its note's ID to the purchase's invoice, naming the note`, async (t) => {
    const tdb = await createTestDatabase(store);
    const db = await createDatabase(tdb.url, { poolSize: 2 });
    await db.dataSource.initialize();
    try {
      await db.dataSource.runMigrations({ transaction: "each" });
      // Back to before the ledger's credit_note_id (and the migrations after it).
      await undoBackTo(db, "LedgerCreditNotes");
      const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);
      const at = "2026-01-15 00:00:00.000";
      // Two partial refunds of purchase inv_p (grant cg_p), and a balance credit note on inv_x (its grant cg_n).
      const notes: [string, string, string, string, string | null][] = [
        ["cn_1", "CN-000001", "inv_p", "refund", null],
        ["cn_2", "CN-000002", "inv_p", "refund", null],
        ["cn_3", "CN-000003", "inv_x", "credit_balance", "cg_n"],
      ];
      for (const [id, number, invoice, outcome, grant] of notes) {
        await q(
          `INSERT INTO credit_notes (id, environment_id, number, invoice_id, invoice_number, subject_id, currency, reason, outcome, ${store === "mysql" ? "`lines`" : '"lines"'}, subtotal, total_tax, total, status, credit_grant_id, metadata, created_at) VALUES (?, 'env_1', ?, ?, 'INV-1', 'subj_1', 'USD', 'other', ?, '[]', '1', '0', '1', 'issued', ?, '{}', ?)`,
          [id, number, invoice, outcome, grant, at],
        );
      }
      // As the old code wrote them: the refunds' entries keyed by the notes' IDs.
      const entries: [string, string, string, string, string, string][] = [
        ["cle_1", "cg_p", "grant", "700", "", "Credit purchase (invoice inv_p)"],
        ["cle_2", "cg_p", "void", "-200", "cn_1", "Credit purchase refunded by a credit note on invoice INV-1"],
        ["cle_3", "cg_p", "void", "-300", "cn_2", "Credit purchase refunded by a credit note on invoice INV-1"],
        ["cle_4", "cg_n", "credit_note", "50", "inv_x", "Credit note on invoice INV-2"],
        ["cle_5", "cg_p", "application", "-100", "inv_y", "Applied to invoice INV-3"],
      ];
      for (const [id, grant, type, amount, invoice, description] of entries) {
        await q(
          "INSERT INTO credit_ledger (id, environment_id, subject_id, grant_id, entry_type, currency, amount, invoice_id, description, created_at) VALUES (?, 'env_1', 'subj_1', ?, ?, 'USD', ?, ?, ?, ?)",
          [id, grant, type, amount, invoice, description, at],
        );
      }
      await db.dataSource.runMigrations({ transaction: "each" });
      const rows: { id: string; invoice_id: string; credit_note_id: string; description: string }[] = await q("SELECT id, invoice_id, credit_note_id, description FROM credit_ledger ORDER BY seq");
      t.deepEqual(
        rows.map((r) => [r.id, r.invoice_id, r.credit_note_id, r.description]),
        [
          ["cle_1", "", "", "Credit purchase (invoice inv_p)"],
          ["cle_2", "inv_p", "cn_1", "Refunded by credit note CN-000001"],
          ["cle_3", "inv_p", "cn_2", "Refunded by credit note CN-000002"],
          ["cle_4", "inv_x", "cn_3", "Credit note on invoice INV-2"],
          ["cle_5", "inv_y", "", "Applied to invoice INV-3"],
        ],
      );
      // The key still allows one application of a grant to an invoice.
      await t.throwsAsync(
        q(
          "INSERT INTO credit_ledger (id, environment_id, subject_id, grant_id, entry_type, currency, amount, invoice_id, credit_note_id, description, created_at) VALUES ('cle_6', 'env_1', 'subj_1', 'cg_p', 'application', 'USD', '-1', 'inv_y', '', 'again', ?)",
          [at],
        ),
      );
    } finally {
      await db.dataSource.destroy();
      await tdb.drop();
    }
  });

  test(`${store}: the credit-note refunds migration backfills the refund notes already stored as succeeded, the others null`, async (t) => {
    const tdb = await createTestDatabase(store);
    const db = await createDatabase(tdb.url, { poolSize: 2 });
    await db.dataSource.initialize();
    try {
      await db.dataSource.runMigrations({ transaction: "each" });
      // Back to before refund_status (and the migrations after it).
      await undoBackTo(db, "CreditNoteRefunds");
      const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);
      const notes: [string, string, string, string | null][] = [
        ["cn_1", "CN-000001", "refund", "re_1"],
        ["cn_2", "CN-000002", "credit_balance", null],
        ["cn_3", "CN-000003", "reduce_amount_due", null],
      ];
      for (const [id, number, outcome, refund] of notes) {
        await q(
          `INSERT INTO credit_notes (id, environment_id, number, invoice_id, invoice_number, subject_id, currency, reason, outcome, ${store === "mysql" ? "`lines`" : '"lines"'}, subtotal, total_tax, total, status, refund_id, metadata, created_at) VALUES (?, 'env_1', ?, 'inv_1', 'INV-1', 'subj_1', 'USD', 'other', ?, '[]', '1', '0', '1', 'issued', ?, '{}', '2026-01-15 00:00:00.000')`,
          [id, number, outcome, refund],
        );
      }
      await db.dataSource.runMigrations({ transaction: "each" });
      const rows: { id: string; refund_status: string | null; refund_failure_reason: string | null }[] = await q("SELECT id, refund_status, refund_failure_reason FROM credit_notes ORDER BY seq");
      t.deepEqual(
        rows.map((r) => [r.id, r.refund_status, r.refund_failure_reason]),
        [
          ["cn_1", "succeeded", null],
          ["cn_2", null, null],
          ["cn_3", null, null],
        ],
      );
    } finally {
      await db.dataSource.destroy();
      await tdb.drop();
    }
  });

  test(`${store}: the minute-totals migration adds the events already stored`, async (t) => {
    const tdb = await createTestDatabase(store);
    const db = await createDatabase(tdb.url, { poolSize: 2 });
    await db.dataSource.initialize();
    try {
      await db.dataSource.runMigrations({ transaction: "each" });
      // Back to before the minute totals (and the migrations after them).
      await undoBackTo(db, "MinuteTotals");
      const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);
      await q(
        "INSERT INTO pricing_metrics (id, environment_id, event_name, name, unit, dimensions, aggregation_type, value_field, created_at) VALUES ('pm_1', 'env_1', 'api', 'API', 'u', '[\"region\"]', 'sum', 'n', '2026-01-01 00:00:00.000')",
      );
      const events: [string, string, string][] = [
        ["k1", "2026-01-01 10:00:05.000", "1.5"],
        ["k2", "2026-01-01 10:00:55.000", "2"],
        ["k3", "2026-01-01 10:01:00.000", "0.25"],
      ];
      for (const [key, at, n] of events) {
        await q(
          "INSERT INTO usage_events (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES (?, 'env_1', ?, 'f', 'subj_1', 'api', ?, ?, ?)",
          [`ue_${key}`, key, at, JSON.stringify({ n, region: "eu" }), at],
        );
      }
      await db.dataSource.runMigrations({ transaction: "each" });
      const rows: { bucket_start: unknown; sum_value: unknown; event_count: unknown }[] = await q(
        "SELECT bucket_start, sum_value, event_count FROM usage_rollups_minute WHERE metric_id = 'pm_1' ORDER BY bucket_start",
      );
      t.deepEqual(
        rows.map((r) => [
          String(r.bucket_start instanceof Date ? r.bucket_start.toISOString() : r.bucket_start)
            .slice(0, 16)
            .replace(" ", "T"),
          Number(r.sum_value),
          Number(r.event_count),
        ]),
        [
          ["2026-01-01T10:00", 3.5, 2],
          ["2026-01-01T10:01", 0.25, 1],
        ],
      );
    } finally {
      await db.dataSource.destroy();
      await tdb.drop();
    }
  });
}

/**
 * TypeORM's schema diff does not compare collations, so this checks them: on MySQL every text
 * column is binary (identifiers compare byte for byte), as the entities declare; the
 * binary-identifiers migration's down refuses, changing nothing, while two values of a unique key
 * would collide under the old collation, and restores it otherwise.
 */
mysqlOnly("mysql: every text column compares byte for byte, as the entities say; down refuses to merge identifiers", async (t) => {
  const tdb = await createTestDatabase("mysql");
  const db = await createDatabase(tdb.url, { poolSize: 2 });
  await db.dataSource.initialize();
  const q = (sql: string, params: unknown[] = []) => db.dataSource.query(sql, params);
  const collations = async (): Promise<Map<string, string>> => {
    const rows: { t: string; c: string; k: string }[] = await q(
      "SELECT TABLE_NAME AS t, COLUMN_NAME AS c, COLLATION_NAME AS k FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND COLLATION_NAME IS NOT NULL AND TABLE_NAME <> 'schema_migrations'",
    );
    return new Map(rows.map((r) => [`${r.t}.${r.c}`, r.k]));
  };
  try {
    await db.dataSource.runMigrations({ transaction: "each" });
    const binary = db.sql.binaryCollation;
    const after = await collations();
    t.true(after.size > 50);
    t.deepEqual(
      [...after].filter(([, k]) => k !== binary),
      [],
    );
    const tables: { t: string; k: string }[] = await q(
      "SELECT TABLE_NAME AS t, TABLE_COLLATION AS k FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME <> 'schema_migrations'",
    );
    t.deepEqual(
      tables.filter((r) => r.k !== binary),
      [],
    );
    // The entities declare the same, column by column.
    const declared = new Map<string, string | undefined>();
    for (const m of db.dataSource.entityMetadatas) for (const c of m.columns) declared.set(`${m.tableName}.${c.databaseName}`, c.collation);
    t.deepEqual(
      [...after.keys()].filter((k) => declared.get(k) !== binary),
      [],
    );

    // Back to just after the binary-identifiers migration.
    await undoBackTo(db, "BinaryIdentifiers", true);
    const atBinaryIdentifiers = await collations();
    const subject = (id: string, ext: string) =>
      q("INSERT INTO subjects (id, environment_id, external_id, external_id_key, metadata, created_at, updated_at) VALUES (?, 'env_1', ?, ?, '{}', '2026-01-01', '2026-01-01')", [id, ext, ext]);
    await subject("subj_1", "ext_x");
    await subject("subj_2", "Ext_x");
    await subject("subj_3", "Muller");
    await q(
      "INSERT INTO usage_events (id, environment_id, idempotency_key, fingerprint, subject_id, event_name, occurred_at, data, created_at) VALUES ('ue_1', 'env_1', 'k', 'f', 'subj_1', 'api', '2026-01-01', '{}', '2026-01-01'), ('ue_2', 'env_1', 'K', 'f', 'subj_1', 'api', '2026-01-01', '{}', '2026-01-01')",
    );
    const err = await t.throwsAsync(() => db.dataSource.undoLastMigration({ transaction: "each" }));
    t.regex(err?.message ?? "", /subjects\.uq_subjects_env_external_id: \('env_1', 'Ext_x'\) and \('env_1', 'ext_x'\)/);
    t.notRegex(err?.message ?? "", /usage_events|Muller/); // idempotency keys stay binary; one Muller collides with nothing
    t.deepEqual(await collations(), atBinaryIdentifiers, "nothing changed");

    await q("DELETE FROM subjects WHERE id = 'subj_2'");
    await db.dataSource.undoLastMigration({ transaction: "each" });
    const before = await collations();
    t.is(before.get("subjects.external_id_key"), "utf8mb4_unicode_ci");
    t.is(before.get("rates.code"), "utf8mb4_unicode_ci");
    t.is(before.get("usage_events.idempotency_key"), binary);
    t.is(before.get("pricing_metrics.event_name"), binary);
    await db.dataSource.runMigrations({ transaction: "each" });
    t.deepEqual(await collations(), after);
    t.deepEqual(
      (await db.dataSource.driver.createSchemaBuilder().log()).upQueries.map((x) => x.query),
      [],
    );
  } finally {
    await db.dataSource.destroy();
    await tdb.drop();
  }
});
