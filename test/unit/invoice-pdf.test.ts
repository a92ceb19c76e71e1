/**
 * The PDF renderer (src/pages/pdf), pure: the same invoice gives the same bytes (its dates are
 * its finalization, nothing random); the paper is asked for or follows the seller's country; a
 * line's discounts and taxes, the invoice's discounts, taxes with rates, credits applied, amount
 * credited and notes are printed with the currency's decimals (read back with pdftotext).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import test from "ava";
import { InvalidArgumentError } from "../../src/billing/errors.js";
import type { CreditNote } from "../../src/billing/credit-notes/types.js";
import type { Invoice } from "../../src/billing/subscriptions/types.js";
import { paperFor, printable } from "../../src/pages/pdf/document.js";
import { creditNotePdf, invoicePdf } from "../../src/pages/pdf/invoice-pdf.js";

const dir = mkdtempSync(join(tmpdir(), "pdf-unit-"));
let n = 0;
function text(pdf: Buffer): string {
  const file = join(dir, `${n++}.pdf`);
  writeFileSync(file, pdf);
  return execFileSync("pdftotext", ["-layout", file, "-"], { encoding: "utf8" });
}

const AT = new Date("2026-02-15T10:00:00Z");
const vat = { taxRateId: "txr_1", displayName: "VAT", percentage: "20", inclusive: false };

function invoice(over: Partial<Invoice> = {}): Invoice {
  return {
    id: "inv_1",
    environmentId: "env_1",
    subjectId: "sub_1",
    subscriptionId: "s_1",
    periodKey: "cycle:1",
    status: "open",
    currency: "KWD",
    total: "11340",
    lines: [
      {
        description: "Seats",
        quantity: "3",
        unitAmount: "3500",
        amount: "10500",
        kind: "fixed",
        key: null,
        windowInvoiceId: null,
        discountAmounts: [{ discountId: "di_1", couponId: "co_1", name: "Spring 10%", amount: "1050" }],
        taxAmounts: [{ ...vat, taxableAmount: "9450", amount: "1890" }],
      },
    ],
    hostedToken: "t".repeat(32),
    periodStart: new Date("2026-01-15T00:00:00Z"),
    periodEnd: AT,
    createdAt: AT,
    window: null,
    finalizesAt: null,
    clockId: null,
    finalizedAt: AT,
    creditsApplied: [{ grantId: "cg_1", amount: "340" }],
    amountDue: "11000",
    number: "INV-000042",
    subtotal: "9450",
    totalDiscount: "1050",
    totalTax: "1890",
    discounts: [{ discountId: "di_1", couponId: "co_1", name: "Spring 10%", amount: "1050" }],
    taxAmounts: [{ ...vat, taxableAmount: "9450", amount: "1890" }],
    notes: ["Reverse charge: VAT to be accounted for by the recipient."],
    customer: {
      legalName: "Buyer W.L.L.",
      email: "ap@buyer.example",
      address: { line1: "Block 3", line2: null, city: "Kuwait City", postalCode: "13001", state: null, country: "KW" },
      taxIds: [{ type: "kw_vat", value: "KW123" }],
      taxExempt: "none",
      taxRateIds: [],
    },
    customerName: "Buyer",
    seller: {
      legalName: "Seller Ltd",
      address: { line1: "1 Quay", line2: null, city: "Dublin", postalCode: "D02", state: null, country: "IE" },
      taxId: "IE1234567T",
      email: "billing@seller.example",
      footer: "Registered in Ireland",
    },
    amountCredited: "500",
    ...over,
  };
}

test("the same invoice gives the same bytes; its dates are its finalization", async (t) => {
  const a = await invoicePdf(invoice());
  const b = await invoicePdf(invoice());
  t.true(a.equals(b));
  const file = join(dir, "dates.pdf");
  writeFileSync(file, a);
  const info = execFileSync("pdfinfo", ["-isodates", file], { encoding: "utf8" });
  t.regex(info, /CreationDate:\s+2026-02-15T10:00:00Z/);
  t.regex(info, /ModDate:\s+2026-02-15T10:00:00Z/);
  t.false(a.equals(await invoicePdf(invoice({ finalizedAt: new Date("2026-02-16T00:00:00Z") }))), "another finalization, another document");
});

test("every booked part is printed, KWD with 3 decimals", async (t) => {
  const s = text(await invoicePdf(invoice()));
  for (const re of [
    /Invoice\s+INV-000042/,
    /Issued 2026-02-15/,
    /Period 2026-01-15 – 2026-02-15/,
    /Seller Ltd/,
    /Tax ID: IE1234567T/,
    /Buyer W\.L\.L\./,
    /13001 Kuwait City/,
    /Tax ID: KW123 \(kw_vat\)/,
    /Seats\s+3\s+KWD 3\.500\s+KWD 10\.500/,
    /Discount: Spring 10%\s+KWD -1\.050/,
    /VAT 20%\s+KWD 1\.890/,
    /Subtotal\s+KWD 9\.450/,
    /VAT 20% on KWD 9\.450\s+KWD 1\.890/,
    /Total tax\s+KWD 1\.890/,
    /Total\s+KWD 11\.340/,
    /Credit applied cg_1\s+KWD -0\.340/,
    /Amount credited\s+KWD -0\.500/,
    /Amount due\s+KWD 11\.000/,
    /Reverse charge/,
    /Registered in Ireland\s+·\s+Page 1 of 1/,
  ]) {
    t.regex(s, re);
  }
});

test("JPY has no decimals; without billing details the buyer is the subject's name", async (t) => {
  const s = text(await invoicePdf(invoice({ currency: "JPY", customer: null, total: "11340", creditsApplied: [], amountDue: undefined, amountCredited: "0" })));
  t.regex(s, /Seats\s+3\s+JPY 3500\s+JPY 10500/);
  t.regex(s, /Amount due\s+JPY 11340/);
  t.regex(s, /Bill to[^\n]*\n(.*\n)*?.*Buyer\n/);
  t.notRegex(s, /Amount credited/);
});

test("paper: asked for, else Letter for a US or Canadian seller, A4 for any other; anything else names `paper`", (t) => {
  t.is(paperFor("A4", "US"), "A4");
  t.is(paperFor("letter", "DE"), "LETTER");
  t.is(paperFor(undefined, "US"), "LETTER");
  t.is(paperFor("", "CA"), "LETTER");
  t.is(paperFor(null, "IE"), "A4");
  t.is(paperFor(null, undefined), "A4");
  const err = t.throws(() => paperFor("legal", "US"), { instanceOf: InvalidArgumentError });
  t.deepEqual(
    err?.violations.map((v) => v.field),
    ["paper"],
  );
});

test("a long invoice goes on over pages, each with its footer and the table's header", async (t) => {
  const lines = Array.from({ length: 80 }, (_, i) => ({ ...invoice().lines[0], description: `Line ${i + 1}`, discountAmounts: [], taxAmounts: [] }) as Invoice["lines"][number]);
  const s = text(await invoicePdf(invoice({ lines })));
  const pages = s.split("\f").filter((p) => p.trim() !== "");
  t.true(pages.length >= 2);
  for (const [i, p] of pages.entries()) t.regex(p, new RegExp(`Page ${i + 1} of ${pages.length}`));
  t.true(pages.slice(1).every((p) => /Description\s+Quantity\s+Unit price\s+Amount/.test(p)));
  t.regex(s, /Line 80\s+3\s+KWD 3\.500/);
});

test("a credit note: its number, invoice, reason, lines, totals and outcome", async (t) => {
  const note: CreditNote = {
    id: "cn_1",
    environmentId: "env_1",
    number: "INV-CN-000001",
    invoiceId: "inv_1",
    invoiceNumber: "INV-000042",
    subjectId: "sub_1",
    currency: "KWD",
    reason: "product_unsatisfactory",
    memo: "Outage in February",
    outcome: "refund",
    lines: [{ invoiceLineIndex: 0, description: "Seats", amount: "1134", taxAmount: "189" }],
    subtotal: "945",
    totalTax: "189",
    total: "1134",
    status: "issued",
    createdAt: new Date("2026-02-20T00:00:00Z"),
    creditGrantId: null,
    refundId: "re_1",
    refundStatus: "succeeded",
    refundFailureReason: null,
    metadata: {},
  };
  const pdf = await creditNotePdf(note, invoice());
  t.true(pdf.equals(await creditNotePdf(note, invoice())));
  const s = text(pdf);
  for (const re of [
    /Credit note\s+INV-CN-000001/,
    /For invoice INV-000042/,
    /Reason Product unsatisfactory/,
    /Seller Ltd/,
    /Buyer W\.L\.L\./,
    /Seats\s+KWD 1\.134/,
    /Tax included\s+KWD 0\.189/,
    /Subtotal\s+KWD 0\.945/,
    /Total tax\s+KWD 0\.189/,
    /Total credited\s+KWD 1\.134/,
    /Refunded to the payment method/,
    /Outage in February/,
  ]) {
    t.regex(s, re);
  }
});

test("text outside the built-in font's encoding is printed as ?, never as another glyph", async (t) => {
  t.is(printable("Zoë – €5 “ok” 山田 🚀"), "Zoë – €5 “ok” ?? ?");
  const s = text(await invoicePdf(invoice({ customer: null, customerName: "山田 Zoë", lines: [{ ...invoice().lines[0], description: "Plan Ωμέγα" } as Invoice["lines"][number]] })));
  t.regex(s, /\?\? Zoë/);
  t.regex(s, /Plan \?\?\?\?\?\s+3/);
});
