/**
 * Credit notes (DESIGN §15) wired over their store: a note that credits the subject's balance
 * has the subject's credit alerts evaluated (the credit watch), as a grant does.
 */
import { CreditNotes } from "../billing/credit-notes/credit-notes.js";
import type { EventEncoder } from "../billing/events/types.js";
import type { Lookups } from "../billing/subscriptions/lookups.js";
import type { Database } from "../db/datasource.js";
import { SqlCreditNoteStore } from "../db/stores/credit-note-store.js";

export function wireCreditNotes(
  db: Database,
  encode: EventEncoder,
  lookups: Lookups,
  publicBaseUrl: () => string,
  watch: { changed(environmentId: string, subjectId: string): Promise<unknown> | unknown },
  /** The cancel of a payment left waiting on an invoice a note pays (payments/cancels.ts). */
  cancels?: CreditNotes["cancels"],
): CreditNotes {
  const notes = new CreditNotes(new SqlCreditNoteStore(db.sql, db.entities, encode), lookups, publicBaseUrl);
  notes.changed = async (environmentId, subjectId) => watch.changed(environmentId, subjectId);
  notes.cancels = cancels;
  return notes;
}
