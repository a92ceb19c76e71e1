import { AlreadyExistsError } from "../../billing/errors.js";
import type { EventEncoder, NewEvent } from "../../billing/events/types.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { Subject } from "../../billing/subject-types.js";
import type { SubjectPatch, SubjectStore } from "../../billing/subjects.js";
import type { Entities, SubjectRow } from "../entities/index.js";
import { isUniqueViolation } from "../errors.js";
import { dbTime, fromDbTime, fromJsonText, mayBeSubjectId } from "../raw.js";
import { type Sql, chunks } from "../sql.js";
import { emOutbox, pipelineOutbox, writeEvents } from "./outbox.js";
import { billingDetailsFromJson } from "./tax-store.js";

/**
 * A key longer than this names no subject: an external ID holds at most 255 characters (510
 * UTF-16 code units), an ID fewer. Longer keys are not sent (a batch of huge keys would make one
 * statement beyond the server's max_allowed_packet and fail its neighbours' lookups with it).
 */
const MAX_KEY_UNITS = 510;

function subjectFromRow(r: SubjectRow): Subject {
  return {
    id: r.id,
    environmentId: r.environment_id,
    createdAt: r.created_at,
    email: r.email,
    externalId: r.external_id,
    metadata: r.metadata ?? {},
    name: r.name,
    testClockId: r.test_clock_id ?? null,
    hasPaymentMethod: Boolean(r.payment_method_id),
    billingDetails: billingDetailsFromJson(r.billing_details),
  };
}

/** `%`, `_` and the escape character itself are literal in a search query. */
function likePattern(query: string): string {
  return `%${query.replace(/[!%_]/g, (c) => `!${c}`)}%`;
}

/**
 * Lookup batches in flight at once. Lookups that arrive meanwhile wait for the batch's answer and
 * then go together, so that under load the batches grow with the database's round trip instead of
 * each turn of the event loop sending its own (at concurrency 16, gRPC GetSubject's batches grew
 * from 5 to about 8 lookups, REST's from 7 to about 8; bench/README.md). A lone lookup still goes
 * at once.
 */
const MAX_BATCHES_IN_FLIGHT = 1;

export class SqlSubjectStore implements SubjectStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
    private readonly encode: EventEncoder,
    private readonly eventTime: () => Date = () => new Date(),
  ) {}

  async insert(s: Subject, events: NewEvent[]): Promise<void> {
    const at = dbTime(s.createdAt);
    try {
      // Pipelined (the create is hot): the subject and its events travel with the COMMIT, one round trip.
      await this.sql.pipelined(async (p) => {
        p.defer([
          "INSERT INTO subjects (id, environment_id, external_id, external_id_key, email, name, metadata, created_at, updated_at, test_clock_id, billing_details) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
          [s.id, s.environmentId, s.externalId, s.externalId, s.email, s.name, JSON.stringify(s.metadata), at, at, s.testClockId, s.billingDetails ? JSON.stringify(s.billingDetails) : null],
        ]);
        await writeEvents(pipelineOutbox(p, this.sql.dataSource), this.encode, this.eventTime, events);
      });
    } catch (err) {
      if (isUniqueViolation(err)) {
        throw new AlreadyExistsError("SUBJECT_EXTERNAL_ID_EXISTS", `a subject with external_id ${JSON.stringify(s.externalId)} already exists`, {
          external_id: s.externalId ?? "",
        });
      }
      throw err;
    }
  }

  /**
   * The hottest read of the service, batched: the lookups that arrive in one turn of the event
   * loop go to the database together (by ID, then by external ID for the keys still unfound),
   * one round trip for many calls instead of one each, and while a batch is in flight the next
   * one gathers (MAX_BATCHES_IN_FLIGHT). Under load every round trip costs the server a socket
   * write and the database a wake-up, more than the lookup itself.
   */
  findByIdOrExternalId(environmentId: string, key: string): Promise<Subject | undefined> {
    return new Promise((resolve, reject) => {
      if (this.lookups === undefined) {
        this.lookups = new Map();
        if (this.batchesInFlight < MAX_BATCHES_IN_FLIGHT) setImmediate(() => this.lookUpBatch());
      }
      let keys = this.lookups.get(environmentId);
      if (keys === undefined) this.lookups.set(environmentId, (keys = new Map()));
      const waiting = keys.get(key);
      if (waiting) waiting.push({ resolve, reject });
      else keys.set(key, [{ resolve, reject }]);
    });
  }

  /** Lookups waiting for the next batch: environment → key → callers. */
  private lookups: Map<string, Map<string, { resolve: (s: Subject | undefined) => void; reject: (err: unknown) => void }[]>> | undefined;

  /** Batches sent and not yet answered. */
  private batchesInFlight = 0;

  private lookUpBatch(): void {
    const batch = this.lookups;
    if (batch === undefined || this.batchesInFlight >= MAX_BATCHES_IN_FLIGHT) return;
    this.lookups = undefined;
    this.batchesInFlight++;
    let left = batch.size;
    const answered = () => {
      if (--left > 0) return;
      this.batchesInFlight--;
      // What arrived meanwhile goes now, as one batch.
      if (this.lookups !== undefined) this.lookUpBatch();
    };
    for (const [environmentId, keys] of batch) {
      this.findMany(environmentId, [...keys.keys()])
        .finally(answered)
        .then(
          (found) => {
            for (const [key, waiting] of keys) {
              const subject = found.get(key);
              if (subject instanceof Error) {
                for (const w of waiting) w.reject(subject);
                continue;
              }
              // Callers of the same key each get their own object.
              waiting.forEach((w, i) => {
                w.resolve(
                  subject && i > 0
                    ? { ...subject, createdAt: new Date(subject.createdAt.getTime()), metadata: { ...subject.metadata }, billingDetails: structuredClone(subject.billingDetails) }
                    : subject,
                );
              });
            }
          },
          (err) => {
            for (const waiting of keys.values()) for (const w of waiting) w.reject(err);
          },
        );
    }
  }

  /**
   * Subjects by key (findSubjectRow's rule: a live subject's ID first, then an external ID). A row
   * that cannot be read (its metadata no JSON) fails its own key's lookups only, as an Error in
   * the map; a key too long to be any subject's is not sent.
   */
  private async findMany(environmentId: string, keys: string[]): Promise<Map<string, Subject | Error>> {
    const found = new Map<string, Subject | Error>();
    const read = async (column: "id" | "external_id_key", list: string[]) => {
      for (const part of chunks(list)) {
        const rows = await this.sql.query<(Omit<SubjectRow, "metadata" | "created_at"> & { metadata: unknown; created_at: unknown })[]>(
          "SELECT id, environment_id, external_id, external_id_key, email, name, metadata, created_at, test_clock_id, payment_method_id, billing_details FROM subjects " +
            `WHERE environment_id = ? AND ${column} IN (${part.map(() => "?").join(", ")})${column === "id" ? " AND deleted_at IS NULL" : ""}`,
          [environmentId, ...part],
        );
        for (const row of rows) {
          const key = column === "id" ? row.id : row.external_id_key;
          // Filed under the value stored; an ID match is never replaced by an external ID's.
          if (key === null || found.has(key)) continue;
          try {
            found.set(key, subjectFromRow({ ...row, metadata: fromJsonText(row.metadata), created_at: fromDbTime(row.created_at) } as SubjectRow));
          } catch (err) {
            found.set(key, err instanceof Error ? err : new Error(String(err)));
          }
        }
      }
    };
    const possible = keys.filter((k) => k.length <= MAX_KEY_UNITS);
    const ids = possible.filter(mayBeSubjectId);
    if (ids.length > 0) await read("id", ids);
    const rest = possible.filter((k) => !found.has(k));
    if (rest.length > 0) await read("external_id_key", rest);
    return found;
  }

  async update(environmentId: string, id: string, patch: SubjectPatch, at: Date, events: (updated: Subject) => NewEvent[]): Promise<Subject | undefined> {
    const set: Partial<SubjectRow> = { updated_at: at };
    if (patch.email !== undefined) set.email = patch.email;
    if (patch.name !== undefined) set.name = patch.name;
    if (patch.metadata !== undefined) set.metadata = patch.metadata;
    if (patch.billingDetails !== undefined) set.billing_details = patch.billingDetails;
    const row = await this.sql.transaction(async (em) => {
      await em.createQueryBuilder().update(this.entities.Subject).set(set).where("environment_id = :env AND id = :id AND deleted_at IS NULL", { env: environmentId, id }).execute();
      const r = await em.findOneBy(this.entities.Subject, { environment_id: environmentId, id });
      if (r && r.deleted_at === null) await writeEvents(emOutbox(em), this.encode, this.eventTime, events(subjectFromRow(r)));
      return r;
    });
    return row && row.deleted_at === null ? subjectFromRow(row) : undefined;
  }

  /**
   * A deferred join: the page's seqs from ix_subjects_env_live_seq alone (an offset skips index
   * entries, not rows), then only the page's rows. limit and offset are checked integers.
   */
  async list(environmentId: string, page: Page): Promise<PageResult<Subject>> {
    return this.livePage(environmentId, "", [], page);
  }

  /**
   * A page of an environment's live subjects in seq order, `filter` (SQL ANDed to the inner
   * WHERE, with its `params`) narrowing them: the page's seqs from the index alone, then only the
   * page's rows (a deferred join). limit and offset are checked integers.
   */
  private async livePage(environmentId: string, filter: string, params: unknown[], page: Page): Promise<PageResult<Subject>> {
    const rows = await this.sql.query<(Omit<SubjectRow, "metadata" | "created_at"> & { metadata: unknown; created_at: unknown })[]>(
      "SELECT s.id, s.environment_id, s.external_id, s.email, s.name, s.metadata, s.created_at, s.test_clock_id, s.payment_method_id, s.billing_details " +
        `FROM (SELECT seq FROM subjects WHERE environment_id = ? AND deleted_at IS NULL${filter} ORDER BY seq LIMIT ${Number(page.limit) + 1} OFFSET ${Number(page.offset)}) p ` +
        "JOIN subjects s ON s.environment_id = ? AND s.seq = p.seq ORDER BY s.seq",
      [environmentId, ...params, environmentId],
    );
    return toPageResult(
      rows.map((r) => subjectFromRow({ ...r, metadata: fromJsonText(r.metadata), created_at: fromDbTime(r.created_at) } as SubjectRow)),
      page,
    );
  }

  /**
   * A substring match of the name or the email (no index can seek one): the page's seqs from
   * ix_subjects_env_live_search, which holds both columns (the walk reads index entries alone),
   * then only the page's rows. Case is ignored by lowering both sides with the same function (the
   * columns compare byte for byte): on MySQL the server's LOWER under the columns' own collation,
   * on SQLite JavaScript's toLowerCase (datasource.ts), so text always matches itself in any case
   * the store's Unicode tables know. Accents are not ignored: `muller` does not find `Müller`.
   */
  async search(environmentId: string, query: string, page: Page): Promise<PageResult<Subject>> {
    const p = this.sql.dialect === "mysql" ? `LOWER(? COLLATE ${this.sql.binaryCollation})` : "LOWER(?)";
    const pattern = likePattern(query);
    return this.livePage(environmentId, ` AND (LOWER(name) LIKE ${p} ESCAPE '!' OR LOWER(email) LIKE ${p} ESCAPE '!')`, [pattern, pattern], page);
  }

  async softDelete(environmentId: string, id: string, at: Date, events: NewEvent[]): Promise<boolean> {
    return this.sql.transaction(async (em) => {
      const res = await em
        .createQueryBuilder()
        .update(this.entities.Subject)
        .set({ deleted_at: at, updated_at: at, external_id_key: null })
        .where("environment_id = :env AND id = :id AND deleted_at IS NULL", { env: environmentId, id })
        .execute();
      if ((res.affected ?? 0) === 0) return false;
      await writeEvents(emOutbox(em), this.encode, this.eventTime, events);
      return true;
    });
  }
}
