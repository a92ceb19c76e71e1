/** An environment's payment settings (DESIGN §16; table payment_settings, migration 30): secrets only ever sealed here. */
import type { EntityManager } from "typeorm";
import type { PaymentSettingsStore, SealedSecrets } from "../../billing/payments/settings.js";
import type { AfterLastAttempt, PaymentSettings, ProviderKind } from "../../billing/payments/types.js";
import type { Entities } from "../entities/index.js";
import type { PaymentSettingsRow } from "../entities/payments.js";
import type { Sql } from "../sql.js";

function fromRow(r: PaymentSettingsRow): PaymentSettings {
  return {
    environmentId: r.environment_id,
    provider: r.provider as ProviderKind,
    stripeSecretKeySealed: r.stripe_secret_key_sealed ?? null,
    stripeSecretKeyLast4: r.stripe_secret_key_last4 ?? null,
    stripeWebhookSecretSealed: r.stripe_webhook_secret_sealed ?? null,
    retryScheduleDays: Array.isArray(r.retry_schedule_days) ? r.retry_schedule_days.map(Number) : [],
    afterLastAttempt: r.after_last_attempt as AfterLastAttempt,
    // MySQL's tinyint comes back as 0/1.
    markUncollectible: Boolean(Number(r.mark_uncollectible)),
    updatedAt: new Date(r.updated_at),
  };
}

function toRow(s: PaymentSettings): PaymentSettingsRow {
  return {
    environment_id: s.environmentId,
    provider: s.provider,
    stripe_secret_key_sealed: s.stripeSecretKeySealed,
    stripe_secret_key_last4: s.stripeSecretKeyLast4,
    stripe_webhook_secret_sealed: s.stripeWebhookSecretSealed,
    retry_schedule_days: [...s.retryScheduleDays],
    after_last_attempt: s.afterLastAttempt,
    mark_uncollectible: s.markUncollectible,
    updated_at: s.updatedAt,
  };
}

export class SqlPaymentSettingsStore implements PaymentSettingsStore {
  constructor(
    private readonly sql: Sql,
    private readonly entities: Pick<Entities, "PaymentSettings">,
  ) {}

  get(environmentId: string): Promise<PaymentSettings | undefined> {
    return this.sql.run(async (em) => {
      const row = await em.findOneBy(this.entities.PaymentSettings, { environment_id: environmentId });
      return row ? fromRow(row) : undefined;
    });
  }

  save(settings: PaymentSettings): Promise<void> {
    return this.sql.transaction(async (em) => {
      await em.save(this.entities.PaymentSettings, toRow(settings));
    });
  }

  all(): Promise<PaymentSettings[]> {
    return this.sql.run(async (em) => (await em.find(this.entities.PaymentSettings, { order: { environment_id: "ASC" } })).map(fromRow));
  }

  reseal(environmentId: string, before: SealedSecrets, after: SealedSecrets): Promise<boolean> {
    return this.sql.transaction(async (em) => {
      const row = await this.locked(em, environmentId);
      if (!row || row.stripe_secret_key_sealed !== before.stripeSecretKeySealed || row.stripe_webhook_secret_sealed !== before.stripeWebhookSecretSealed) return false;
      await em.update(
        this.entities.PaymentSettings,
        { environment_id: environmentId },
        { stripe_secret_key_sealed: after.stripeSecretKeySealed, stripe_webhook_secret_sealed: after.stripeWebhookSecretSealed },
      );
      return true;
    });
  }

  private async locked(em: EntityManager, environmentId: string): Promise<PaymentSettingsRow | null> {
    const qb = em.createQueryBuilder(this.entities.PaymentSettings, "p").where("p.environment_id = :id", { id: environmentId });
    if (this.sql.dialect === "mysql") qb.setLock("pessimistic_write");
    return qb.getOne();
  }
}
