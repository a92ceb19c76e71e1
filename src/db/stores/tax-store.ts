/**
 * Storage of tax rates, of subjects' billing details and rate cards' default tax rates (JSON on
 * their rows), and of an environment's invoice settings (its row and invoice sequence), DESIGN §15.
 */
import { type EntityManager, In } from "typeorm";
import type { ArchivedFilter } from "../../billing/catalog/metrics.js";
import type { Page, PageResult } from "../../billing/pagination.js";
import { toPageResult } from "../../billing/pagination.js";
import type { TaxRateStore } from "../../billing/taxes/rates.js";
import { DEFAULT_PREFIX, type InvoiceSettings, type InvoiceSettingsStore } from "../../billing/taxes/settings.js";
import type { BillingDetails, SellerDetails, TaxExempt, TaxRate } from "../../billing/taxes/types.js";
import type { Entities, TaxRateRow } from "../entities/index.js";
import type { Sql } from "../sql.js";
import { peekNextNumber } from "./numbering.js";
import { archivedWhere } from "./rate-card-store.js";

function rateFromRow(r: TaxRateRow): TaxRate {
  return {
    id: r.id,
    environmentId: r.environment_id,
    displayName: r.display_name,
    percentage: r.percentage,
    inclusive: Boolean(r.inclusive),
    country: r.country,
    region: r.region,
    description: r.description,
    archived: r.archived_at !== null,
    createdAt: r.created_at,
    metadata: r.metadata ?? {},
  };
}

/** Stored billing details (JSON text or parsed) in the domain's shape; null when never set. */
export function billingDetailsFromJson(raw: unknown): BillingDetails | null {
  if (raw === null || raw === undefined) return null;
  const d = (typeof raw === "string" ? JSON.parse(raw) : raw) as Partial<BillingDetails>;
  return {
    legalName: d.legalName ?? null,
    email: d.email ?? null,
    address: d.address ?? null,
    taxIds: d.taxIds ?? [],
    taxExempt: (d.taxExempt ?? "none") as TaxExempt,
    taxRateIds: d.taxRateIds ?? [],
  };
}

/** An environment's stored seller (JSON, SellerDetails' camelCase keys) in the domain's shape; booking reads it too. */
export function sellerFromJson(raw: unknown): SellerDetails | null {
  if (raw === null || raw === undefined) return null;
  const s = (typeof raw === "string" ? JSON.parse(raw) : raw) as Partial<SellerDetails>;
  return { legalName: s.legalName ?? null, address: s.address ?? null, taxId: s.taxId ?? null, email: s.email ?? null, footer: s.footer ?? null };
}

/** Tax rates of an environment by id (archived ones too). */
export async function taxRatesOf(em: EntityManager, environmentId: string, ids: readonly string[]): Promise<TaxRate[]> {
  if (ids.length === 0) return [];
  const rows = await em.getRepository<TaxRateRow>("TaxRate").find({ where: { environment_id: environmentId, id: In([...ids]) } });
  return rows.map(rateFromRow);
}

/** A subject's billing details (null: never set). */
export async function billingDetailsOf(em: EntityManager, environmentId: string, subjectId: string): Promise<BillingDetails | null> {
  const [row] = (await em.query("SELECT billing_details AS d FROM subjects WHERE environment_id = ? AND id = ?", [environmentId, subjectId])) as { d: unknown }[];
  return billingDetailsFromJson(row?.d);
}

/** Stored default tax rates of a rate card (JSON text or parsed); empty when never set. */
const rateIdsFromJson = (ids: unknown): string[] => (ids === null || ids === undefined ? [] : ((typeof ids === "string" ? JSON.parse(ids) : ids) as string[]));

/** A rate card's default tax rates. */
export async function cardTaxRateIds(em: EntityManager, environmentId: string, rateCardId: string): Promise<string[]> {
  const [row] = (await em.query("SELECT default_tax_rate_ids AS ids FROM rate_cards WHERE environment_id = ? AND id = ?", [environmentId, rateCardId])) as { ids: unknown }[];
  return rateIdsFromJson(row?.ids);
}

/** cardTaxRateIds of each of these rate cards (of one environment), in one read; a card not found has none. */
export async function cardTaxRateIdsOf(em: EntityManager, environmentId: string, rateCardIds: readonly string[]): Promise<Map<string, string[]>> {
  if (rateCardIds.length === 0) return new Map();
  const rows = (await em.query(`SELECT id, default_tax_rate_ids AS ids FROM rate_cards WHERE environment_id = ? AND id IN (${rateCardIds.map(() => "?").join(", ")})`, [
    environmentId,
    ...rateCardIds,
  ])) as { id: string; ids: unknown }[];
  const found = new Map(rows.map((r) => [r.id, rateIdsFromJson(r.ids)]));
  return new Map(rateCardIds.map((id) => [id, found.get(id) ?? []]));
}

/** The name and billing details of each of these subjects (of one environment) that exists, in one read. */
export async function subjectsBillingOf(em: EntityManager, environmentId: string, subjectIds: readonly string[]): Promise<Map<string, { name: string | null; details: BillingDetails | null }>> {
  if (subjectIds.length === 0) return new Map();
  const rows = (await em.query(`SELECT id, name, billing_details AS d FROM subjects WHERE environment_id = ? AND id IN (${subjectIds.map(() => "?").join(", ")})`, [environmentId, ...subjectIds])) as {
    id: string;
    name: string | null;
    d: unknown;
  }[];
  return new Map(rows.map((r) => [r.id, { name: r.name ?? null, details: billingDetailsFromJson(r.d) }]));
}

export class SqlTaxRateStore implements TaxRateStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Entities,
  ) {}

  async insert(r: TaxRate): Promise<void> {
    await this.sql.run((em) =>
      em.insert(this.entities.TaxRate, {
        id: r.id,
        environment_id: r.environmentId,
        display_name: r.displayName,
        percentage: r.percentage,
        inclusive: r.inclusive,
        country: r.country,
        region: r.region,
        description: r.description,
        metadata: r.metadata,
        created_at: r.createdAt,
        archived_at: null,
      }),
    );
  }

  async get(environmentId: string, id: string): Promise<TaxRate | undefined> {
    const row = await this.sql.run((em) => em.findOneBy(this.entities.TaxRate, { environment_id: environmentId, id }));
    return row ? rateFromRow(row) : undefined;
  }

  async list(environmentId: string, page: Page, filter: ArchivedFilter): Promise<PageResult<TaxRate>> {
    const rows = await this.sql.run((em) =>
      em.find(this.entities.TaxRate, { where: { environment_id: environmentId, ...archivedWhere(filter) }, order: { seq: "ASC" }, take: page.limit + 1, skip: page.offset }),
    );
    return toPageResult(rows.map(rateFromRow), page);
  }

  async archive(environmentId: string, id: string): Promise<TaxRate | undefined> {
    return this.sql.transaction(async (em) => {
      await em
        .createQueryBuilder()
        .update(this.entities.TaxRate)
        .set({ archived_at: new Date() })
        .where("environment_id = :env AND id = :id AND archived_at IS NULL", { env: environmentId, id })
        .execute();
      const row = await em.findOneBy(this.entities.TaxRate, { environment_id: environmentId, id });
      return row ? rateFromRow(row) : undefined;
    });
  }

  byIds = (environmentId: string, ids: readonly string[]): Promise<TaxRate[]> => this.sql.run((em) => taxRatesOf(em, environmentId, ids));
}

/** The environment's invoice prefix and seller (columns of its row, migration 26) and its next invoice number. */
export class SqlInvoiceSettingsStore implements InvoiceSettingsStore {
  constructor(private readonly sql: Sql) {}

  get(environmentId: string): Promise<InvoiceSettings> {
    return this.sql.run((em) => this.read(em, environmentId));
  }

  update(environmentId: string, change: { numberPrefix?: string; seller?: SellerDetails | null }): Promise<InvoiceSettings> {
    return this.sql.transaction(async (em) => {
      if (change.numberPrefix !== undefined) await em.query("UPDATE environments SET invoice_prefix = ? WHERE id = ?", [change.numberPrefix, environmentId]);
      if (change.seller !== undefined) {
        // The JSON keeps SellerDetails' camelCase keys, which sellerFromJson reads.
        await em.query("UPDATE environments SET seller = ? WHERE id = ?", [change.seller === null ? null : JSON.stringify(change.seller), environmentId]);
      }
      return this.read(em, environmentId);
    });
  }

  private async read(em: EntityManager, environmentId: string): Promise<InvoiceSettings> {
    const [row] = (await em.query("SELECT invoice_prefix AS p, seller FROM environments WHERE id = ?", [environmentId])) as { p: string; seller: unknown }[];
    return { numberPrefix: row?.p ?? DEFAULT_PREFIX, nextInvoiceSequence: await peekNextNumber(em, environmentId, "invoice"), seller: sellerFromJson(row?.seller) };
  }
}
