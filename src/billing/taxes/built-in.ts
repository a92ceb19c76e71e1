/**
 * The built-in tax engine (DESIGN §15), the TaxProvider port's one adapter: the environment's
 * own tax rates.
 */
import type { AppliedTaxRate, TaxAnswer, TaxProvider, TaxQuery, TaxRate } from "./types.js";

/** Reads tax rates of an environment by id (archived ones too: a rate set before still applies). */
export type TaxRateReader = (environmentId: string, ids: readonly string[]) => Promise<TaxRate[]>;

export class BuiltInTaxProvider implements TaxProvider {
  constructor(private readonly rates: TaxRateReader) {}

  async taxesFor(q: TaxQuery): Promise<TaxAnswer> {
    const exempt = q.customer?.taxExempt ?? "none";
    if (exempt !== "none") return { exempt, ratesPerLine: q.lines.map(() => []) };
    // The subject's own rates for every line; else each line's card's defaults (the invoice's card's, unless another priced it).
    const own = q.customer && q.customer.taxRateIds.length > 0 ? q.customer.taxRateIds : null;
    const idsOf = (line: TaxQuery["lines"][number]): readonly string[] => own ?? line.cardTaxRateIds ?? q.cardTaxRateIds;
    const all = [...new Set(q.lines.flatMap(idsOf))];
    if (all.length === 0) return { exempt, ratesPerLine: q.lines.map(() => []) };
    const country = q.customer?.address?.country ?? null;
    const region = q.customer?.address?.state ?? null;
    const found = new Map((await this.rates(q.environmentId, all)).map((r) => [r.id, r]));
    // In the order they were set; a rate with a country (or region) applies only to a buyer known
    // to be there: not to one of another country, nor to one whose address (or state) is unknown.
    const applied = (ids: readonly string[]): AppliedTaxRate[] =>
      ids.flatMap((id) => {
        const r = found.get(id);
        if (!r) return [];
        if (r.country !== null && r.country !== country) return [];
        if (r.region !== null && r.region !== region) return [];
        return [{ id: r.id, displayName: r.displayName, percentage: r.percentage, inclusive: r.inclusive }];
      });
    return { exempt, ratesPerLine: q.lines.map((l) => applied(idsOf(l))) };
  }
}
