/** Every migration, in order. Listed by hand: no globs (they are brittle under ESM). */
import type { MigrationInterface } from "typeorm";
import { Foundation1795000000000 } from "./1795000000000-Foundation.js";
import { Catalog1795000000001 } from "./1795000000001-Catalog.js";
import { Metering1795000000002 } from "./1795000000002-Metering.js";
import { Billing1795000000003 } from "./1795000000003-Billing.js";
import { Timelines1795000000004 } from "./1795000000004-Timelines.js";
import { MinuteTotals1795000000005 } from "./1795000000005-MinuteTotals.js";
import { ExactIdentifiers1795000000006 } from "./1795000000006-ExactIdentifiers.js";
import { LargeJson1795000000007 } from "./1795000000007-LargeJson.js";
import { BinaryIdentifiers1795000000008 } from "./1795000000008-BinaryIdentifiers.js";
import { BillingLimits1795000000009 } from "./1795000000009-BillingLimits.js";
import { RateLimits1795000000010 } from "./1795000000010-RateLimits.js";
import { CustomerPortal1795000000011 } from "./1795000000011-CustomerPortal.js";
import { InvoiceLifecycle1795000000012 } from "./1795000000012-InvoiceLifecycle.js";
import { PauseResume1795000000013 } from "./1795000000013-PauseResume.js";
import { Webhooks1795000000014 } from "./1795000000014-Webhooks.js";
import { DashboardSessions1795000000015 } from "./1795000000015-DashboardSessions.js";
import { DashboardScale1795000000016 } from "./1795000000016-DashboardScale.js";
import { EventFanOut1795000000017 } from "./1795000000017-EventFanOut.js";
import { SubjectSearch1795000000018 } from "./1795000000018-SubjectSearch.js";
import { IdempotencyKeys1795000000019 } from "./1795000000019-IdempotencyKeys.js";
import { DeliveryReplays1795000000020 } from "./1795000000020-DeliveryReplays.js";
import { PricesAndArchive1795000000021 } from "./1795000000021-PricesAndArchive.js";
import { UniqueCounts1795000000022 } from "./1795000000022-UniqueCounts.js";
import { SeatChanges1795000000023 } from "./1795000000023-SeatChanges.js";
import { Credits1795000000024 } from "./1795000000024-Credits.js";
import { CreditApplications1795000000025 } from "./1795000000025-CreditApplications.js";
import { InvoiceBooking1795000000026 } from "./1795000000026-InvoiceBooking.js";
import { CreditNotes1795000000029 } from "./1795000000029-CreditNotes.js";
import { Payments1795000000030 } from "./1795000000030-Payments.js";
import { TestClockStatus1795000000031 } from "./1795000000031-TestClockStatus.js";
import { LedgerCreditNotes1795000000032 } from "./1795000000032-LedgerCreditNotes.js";
import { ChargedTerms1795000000033 } from "./1795000000033-ChargedTerms.js";
import { CreditNoteRefunds1795000000034 } from "./1795000000034-CreditNoteRefunds.js";
import { TopUpCrossings1795000000035 } from "./1795000000035-TopUpCrossings.js";
import { CheckoutExpiry1795000000036 } from "./1795000000036-CheckoutExpiry.js";
import { FinanceExports1795000000037 } from "./1795000000037-FinanceExports.js";
import { FirstSeenAnchors1795000000038 } from "./1795000000038-FirstSeenAnchors.js";
import { UsageAdjustments1795000000039 } from "./1795000000039-UsageAdjustments.js";
import { OnceDiscountHolds1795000000040 } from "./1795000000040-OnceDiscountHolds.js";
import { CarriedBelowMinimum1795000000041 } from "./1795000000041-CarriedBelowMinimum.js";
import { Taxes1795000000027 } from "./1795000000027-Taxes.js";
import { Coupons1795000000028 } from "./1795000000028-Coupons.js";

export const migrations: (new () => MigrationInterface)[] = [
  Foundation1795000000000,
  Catalog1795000000001,
  Metering1795000000002,
  Billing1795000000003,
  Timelines1795000000004,
  MinuteTotals1795000000005,
  ExactIdentifiers1795000000006,
  LargeJson1795000000007,
  BinaryIdentifiers1795000000008,
  BillingLimits1795000000009,
  RateLimits1795000000010,
  CustomerPortal1795000000011,
  InvoiceLifecycle1795000000012,
  PauseResume1795000000013,
  Webhooks1795000000014,
  DashboardSessions1795000000015,
  DashboardScale1795000000016,
  EventFanOut1795000000017,
  SubjectSearch1795000000018,
  IdempotencyKeys1795000000019,
  DeliveryReplays1795000000020,
  PricesAndArchive1795000000021,
  UniqueCounts1795000000022,
  SeatChanges1795000000023,
  Credits1795000000024,
  CreditApplications1795000000025,
  InvoiceBooking1795000000026,
  Taxes1795000000027,
  Coupons1795000000028,
  CreditNotes1795000000029,
  Payments1795000000030,
  TestClockStatus1795000000031,
  LedgerCreditNotes1795000000032,
  ChargedTerms1795000000033,
  CreditNoteRefunds1795000000034,
  TopUpCrossings1795000000035,
  CheckoutExpiry1795000000036,
  FinanceExports1795000000037,
  FirstSeenAnchors1795000000038,
  UsageAdjustments1795000000039,
  OnceDiscountHolds1795000000040,
  CarriedBelowMinimum1795000000041,
];

/** The table TypeORM records applied migrations in, on both stores. */
export const MIGRATIONS_TABLE = "schema_migrations";

/**
 * The DataSource options both stores share: the schema comes from these migrations alone (never
 * synchronized from the entities), and TypeORM logs nothing of its own.
 */
export function schemaOptions<E extends object>(entities: Record<string, E>) {
  return { migrations, migrationsTableName: MIGRATIONS_TABLE, synchronize: false, logging: false, entities: Object.values(entities) };
}
