/**
 * A metric's totals per combination of dimensions over a range, for many subjects in one
 * statement (MySQL): reads asked for in the same turn of the event loop with the same metric,
 * grain and range — a cycle close measures a hundred subjects' periods at once, billing-state
 * reads come in together — are sent as one `subject_id IN (…)` read, each caller given its own
 * subject's rows in the order the single read gave them (by dims_hash). Exact: DECIMAL arithmetic.
 */
import type { Grain } from "../../billing/metering/events.js";
import type { StoredTotal } from "../../billing/metering/usage-store.js";
import { dbTime, fromJsonText } from "../raw.js";
import { type Sql, chunks } from "../sql.js";
import { TOTALS_TABLE } from "./usage-sql.js";

interface Waiter {
  subjectId: string;
  resolve: (rows: StoredTotal[]) => void;
  reject: (err: unknown) => void;
}

interface Pending {
  grain: Grain;
  metricId: string;
  from: number;
  to: number;
  waiters: Waiter[];
}

type TotalsRow = { subject_id: string; dims: unknown; sum_value: unknown; event_count: unknown; max_value: unknown };

export class TotalsReads {
  /** Reads asked for in this turn, by metric, grain and range; sent at the end of the turn. */
  private pending = new Map<string, Pending>();

  constructor(private readonly sql: Sql) {}

  totalsByDims(metricId: string, subjectId: string, from: number, to: number, grain: Grain): Promise<StoredTotal[]> {
    return new Promise((resolve, reject) => {
      if (this.pending.size === 0) setImmediate(() => this.flush());
      const key = `${grain} ${metricId} ${from} ${to}`;
      let p = this.pending.get(key);
      if (!p) this.pending.set(key, (p = { grain, metricId, from, to, waiters: [] }));
      p.waiters.push({ subjectId, resolve, reject });
    });
  }

  private flush(): void {
    const all = [...this.pending.values()];
    this.pending = new Map();
    for (const p of all) {
      for (const part of chunks([...new Set(p.waiters.map((w) => w.subjectId))], 200)) {
        const waiters = p.waiters.filter((w) => part.includes(w.subjectId));
        this.read(p, part).then(
          (bySubject) => {
            for (const w of waiters) w.resolve(bySubject.get(w.subjectId) ?? []);
          },
          (err: unknown) => {
            for (const w of waiters) w.reject(err);
          },
        );
      }
    }
  }

  private async read(p: Pending, subjectIds: string[]): Promise<Map<string, StoredTotal[]>> {
    const rows = await this.sql.query<TotalsRow[]>(
      `SELECT subject_id, MIN(dims) AS dims, SUM(sum_value) AS sum_value, SUM(event_count) AS event_count, MAX(max_value) AS max_value FROM ${TOTALS_TABLE[p.grain]} WHERE metric_id = ? AND subject_id IN (${subjectIds.map(() => "?").join(", ")}) AND bucket_start >= ? AND bucket_start < ? GROUP BY subject_id, dims_hash ORDER BY subject_id, dims_hash`,
      [p.metricId, ...subjectIds, dbTime(new Date(p.from)), dbTime(new Date(p.to))],
    );
    const out = new Map<string, StoredTotal[]>();
    for (const r of rows) {
      const total = { dims: fromJsonText<Record<string, string>>(r.dims), sum: String(r.sum_value), count: String(r.event_count), max: r.max_value === null ? null : String(r.max_value) };
      const list = out.get(r.subject_id);
      if (list) list.push(total);
      else out.set(r.subject_id, [total]);
    }
    return out;
  }
}
