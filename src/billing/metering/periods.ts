/**
 * Time ranges for usage reads, in UTC with explicit inclusivity (DESIGN §7: start inclusive and
 * end exclusive unless told otherwise), and their split into hour/day/week buckets (weeks start
 * on Monday) clipped to the range.
 */
export type Granularity = "hour" | "day" | "week";
export const GRANULARITIES: readonly Granularity[] = ["hour", "day", "week"];

export interface Range {
  start: number;
  end: number;
  inclusiveStart: boolean;
  inclusiveEnd: boolean;
}

export const MINUTE = 60_000;
export const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export function contains(r: Range, t: number): boolean {
  const afterStart = r.inclusiveStart ? t >= r.start : t > r.start;
  const beforeEnd = r.inclusiveEnd ? t <= r.end : t < r.end;
  return afterStart && beforeEnd;
}

/** The start of the UTC hour/day/week (Monday) containing t. */
export function floorTo(g: Granularity, t: number): number {
  if (g === "hour") return Math.floor(t / HOUR) * HOUR;
  const day = Math.floor(t / DAY) * DAY;
  if (g === "day") return day;
  const weekday = (new Date(day).getUTCDay() + 6) % 7; // Monday = 0
  return day - weekday * DAY;
}

function next(g: Granularity, t: number): number {
  return t + (g === "hour" ? HOUR : g === "day" ? DAY : 7 * DAY);
}

/** How many buckets `buckets` would make (without making them). */
export function bucketCount(r: Range, g: Granularity | undefined): number {
  if (!g) return 1;
  const step = g === "hour" ? HOUR : g === "day" ? DAY : 7 * DAY;
  return Math.floor((r.end - floorTo(g, r.start)) / step) + 1;
}

/**
 * The buckets of a range: the whole range without a granularity; otherwise UTC-aligned buckets
 * clipped to the range. Inner boundaries are start-inclusive and end-exclusive; the first bucket
 * keeps the range's start inclusivity and the last its end inclusivity. A bucket that could hold
 * no instant (e.g. an exclusive end on a boundary) is left out.
 */
export function buckets(r: Range, g: Granularity | undefined): Range[] {
  if (!g) return [r];
  const out: Range[] = [];
  for (let b = floorTo(g, r.start); b <= r.end; b = next(g, b)) {
    const start = Math.max(b, r.start);
    const end = Math.min(next(g, b), r.end);
    const bucket: Range = {
      start,
      end,
      inclusiveStart: start === r.start ? r.inclusiveStart : true,
      // The range's inclusive end belongs to the bucket that starts there when one does.
      inclusiveEnd: end === r.end && next(g, b) > r.end ? r.inclusiveEnd : false,
    };
    if (start < end || (start === end && bucket.inclusiveStart && bucket.inclusiveEnd)) out.push(bucket);
  }
  return out;
}

/**
 * Splits a range into the whole units (hours or minutes) inside it, [fullFrom, fullTo), which the
 * totals of that grain answer, and the partial edges, which a finer grain or raw events answer:
 * every instant of the range is in exactly one part.
 */
export function splitByHours(r: Range, unit = HOUR): { fullFrom: number; fullTo: number; edges: Range[] } {
  const HOUR = unit;
  let fullFrom = Math.ceil(r.start / HOUR) * HOUR;
  if (fullFrom === r.start && !r.inclusiveStart) fullFrom += HOUR;
  const fullTo = Math.floor(r.end / HOUR) * HOUR;
  if (fullFrom >= fullTo) return { fullFrom: 0, fullTo: 0, edges: [r] };
  const edges: Range[] = [];
  if (r.start < fullFrom) {
    edges.push({ start: r.start, end: fullFrom, inclusiveStart: r.inclusiveStart, inclusiveEnd: false });
  }
  if (fullTo < r.end || (fullTo === r.end && r.inclusiveEnd)) {
    edges.push({ start: fullTo, end: r.end, inclusiveStart: true, inclusiveEnd: r.inclusiveEnd });
  }
  return { fullFrom, fullTo, edges };
}
