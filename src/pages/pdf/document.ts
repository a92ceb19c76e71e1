/**
 * The PDF writer the invoice and credit note PDFs share (pdfkit, its built-in Helvetica: nothing
 * embedded, nothing read from disk): the paper (A4 or Letter), the parties' blocks, a table of
 * four columns (description, quantity, unit price, amount) that goes on to a new page when full,
 * rows of totals, and a footer on every page. The same document gives the same bytes: the
 * document's dates are the one instant given (its finalization), and its file ID is derived from
 * them (pdfkit hashes the info dictionary), nothing random.
 */
import PDFDocument from "pdfkit";
import { Violations } from "../../billing/errors.js";
import type { Address, BillingDetails, SellerDetails } from "../../billing/taxes/types.js";

export type Paper = "A4" | "LETTER";

/** What the built-in fonts' encoding (WinAnsi) has beyond Latin-1. */
const WIN_ANSI_EXTRA = new Set("€‚ƒ„…†‡ˆ‰Š‹ŒŽ‘’“”•–—˜™š›œžŸ");

/**
 * Text the built-in Helvetica can print: a character outside its encoding (WinAnsi: Latin-1 and
 * a few more) is written "?" rather than as some other glyph. Printing other scripts takes an
 * embedded Unicode font (not bundled; pdfkit also names a subset font at random, which would end
 * the same-bytes rule).
 */
export function printable(text: string): string {
  let out = "";
  for (const ch of text.normalize("NFC")) {
    const c = ch.codePointAt(0) as number;
    out += (c >= 0x20 && c <= 0x7e) || (c >= 0xa0 && c <= 0xff) || WIN_ANSI_EXTRA.has(ch) ? ch : c === 0x0a ? "\n" : "?";
  }
  return out;
}

/** `?paper=a4|letter`; absent or empty: Letter for a seller in the US or Canada, else A4. Anything else: invalid_argument naming `paper`. */
export function paperFor(requested: string | null | undefined, sellerCountry: string | null | undefined): Paper {
  const p = (requested ?? "").trim().toLowerCase();
  if (p === "a4") return "A4";
  if (p === "letter") return "LETTER";
  if (p !== "") {
    const v = new Violations();
    v.add("paper", "must be a4 or letter");
    v.throwIfAny();
  }
  return sellerCountry === "US" || sellerCountry === "CA" ? "LETTER" : "A4";
}

const MARGIN = 50;
const FONT = "Helvetica";
const BOLD = "Helvetica-Bold";
const GREY = "#555555";
/** The columns' shares of the width: description, quantity, unit price, amount. */
const SHARES = [0.46, 0.12, 0.2, 0.22] as const;

/** A row of the table: its cells (description left, the others right-aligned), and notes under the description. */
export interface Row {
  cells: [string, string, string, string];
  details?: [label: string, amount: string][];
}

export class PdfWriter {
  readonly doc: PDFKit.PDFDocument;
  private y = MARGIN;
  private readonly width: number;
  private readonly cols: { x: number; w: number }[];
  private header: [string, string, string, string] | undefined;

  constructor(paper: Paper, title: string, at: Date) {
    this.doc = new PDFDocument({
      size: paper,
      margin: MARGIN,
      bufferPages: true,
      info: { Title: title, Creator: "Usage billing", Producer: "Usage billing (PDFKit)", CreationDate: at, ModDate: at },
    });
    this.width = this.doc.page.width - 2 * MARGIN;
    let x = MARGIN;
    this.cols = SHARES.map((s) => {
      const c = { x, w: this.width * s };
      x += c.w;
      return c;
    });
  }

  private get bottom(): number {
    return this.doc.page.height - MARGIN - 20;
  }

  /** Room for `h` more points on this page, else a new page (with the table's header again when inside the table). */
  private room(h: number): void {
    if (this.y + h <= this.bottom) return;
    this.doc.addPage();
    this.y = MARGIN;
    if (this.header) this.headerRow(this.header);
  }

  title(text: string, right: string): void {
    this.doc.font(BOLD).fontSize(22).fillColor("black").text(printable(text), MARGIN, this.y, { lineBreak: false });
    this.doc
      .font(BOLD)
      .fontSize(14)
      .text(printable(right), MARGIN, this.y + 6, { width: this.width, align: "right", lineBreak: false });
    this.y += 34;
  }

  /** Lines of small text ("Issued 2026-01-15"), one under the other. */
  facts(lines: string[]): void {
    this.doc.font(FONT).fontSize(10).fillColor("black");
    for (const l of lines) {
      this.doc.text(printable(l), MARGIN, this.y, { width: this.width });
      this.y = this.doc.y;
    }
    this.y += 12;
  }

  /** Two blocks side by side: the seller (left) and the buyer (right), each a heading and lines. */
  parties(left: [string, string[]], right: [string, string[]]): void {
    const half = this.width / 2 - 10;
    const block = (x: number, [heading, lines]: [string, string[]]) => {
      this.doc.font(BOLD).fontSize(10).fillColor(GREY).text(printable(heading), x, this.y, { width: half });
      this.doc.font(FONT).fontSize(10).fillColor("black");
      for (const l of lines) this.doc.text(printable(l), x, this.doc.y, { width: half });
      return this.doc.y;
    };
    const end = Math.max(block(MARGIN, left), block(MARGIN + this.width / 2 + 10, right));
    this.y = end + 18;
  }

  private cells(cells: readonly string[], font: string, size: number, color: string): number {
    this.doc.font(font).fontSize(size).fillColor(color);
    let h = 0;
    cells.forEach((raw, i) => {
      const text = printable(raw);
      const c = this.cols[i] as { x: number; w: number };
      const opts = { width: c.w - 6, align: i === 0 ? ("left" as const) : ("right" as const) };
      this.doc.text(text, i === 0 ? c.x : c.x + 6, this.y, opts);
      h = Math.max(h, this.doc.heightOfString(text, opts));
    });
    return h;
  }

  private headerRow(h: [string, string, string, string]): void {
    const height = this.cells(h, BOLD, 10, GREY);
    this.y += height + 4;
    this.doc
      .moveTo(MARGIN, this.y)
      .lineTo(MARGIN + this.width, this.y)
      .lineWidth(0.5)
      .strokeColor(GREY)
      .stroke();
    this.y += 6;
  }

  /** The table: its header, then each row (a new page repeats the header). */
  table(header: [string, string, string, string], rows: Row[], empty: string): void {
    this.header = header;
    this.room(40);
    this.headerRow(header);
    if (rows.length === 0) rows = [{ cells: [empty, "", "", ""] }];
    for (const r of rows) {
      this.doc.font(FONT).fontSize(10);
      const h = this.doc.heightOfString(printable(r.cells[0]), { width: (this.cols[0]?.w ?? 0) - 6 }) + (r.details?.length ?? 0) * 12;
      this.room(h + 6);
      this.y += this.cells(r.cells, FONT, 10, "black") + 2;
      for (const [label, amount] of r.details ?? []) {
        this.cells([`   ${label}`, "", "", amount], FONT, 8, GREY);
        this.y += 12;
      }
      this.y += 4;
    }
    this.header = undefined;
    this.doc
      .moveTo(MARGIN, this.y)
      .lineTo(MARGIN + this.width, this.y)
      .lineWidth(0.5)
      .strokeColor(GREY)
      .stroke();
    this.y += 8;
  }

  /** A row of the totals: the label right-aligned before the amount column; `strong`: bold. */
  total(label: string, amount: string, strong = false): void {
    this.room(16);
    const labelWidth = this.width * (1 - SHARES[3]);
    this.doc
      .font(strong ? BOLD : FONT)
      .fontSize(10)
      .fillColor("black");
    this.doc.text(printable(label), MARGIN, this.y, { width: labelWidth - 6, align: "right" });
    const c = this.cols[3] as { x: number; w: number };
    this.doc.text(amount, c.x + 6, this.y, { width: c.w - 6, align: "right" });
    this.y += 15;
  }

  /** Paragraphs of text (notes, a memo), under the totals. */
  paragraphs(texts: string[]): void {
    if (texts.length === 0) return;
    this.y += 10;
    this.doc.font(FONT).fontSize(9).fillColor("black");
    for (const t of texts.map(printable)) {
      this.room(this.doc.heightOfString(t, { width: this.width }) + 4);
      this.doc.text(t, MARGIN, this.y, { width: this.width });
      this.y = this.doc.y + 4;
    }
  }

  /** Writes `footer` and "Page i of n" at the bottom of every page, ends the document and gives its bytes. */
  finish(footer: string): Promise<Buffer> {
    const { doc } = this;
    const range = doc.bufferedPageRange();
    for (let i = range.start; i < range.start + range.count; i++) {
      doc.switchToPage(i);
      const bottom = doc.page.margins.bottom;
      doc.page.margins.bottom = 0; // text below the margin would otherwise start a new page
      const text = [printable(footer), `Page ${i + 1} of ${range.count}`].filter((s) => s !== "").join("  ·  ");
      doc
        .font(FONT)
        .fontSize(8)
        .fillColor(GREY)
        .text(text, MARGIN, doc.page.height - MARGIN, { width: this.width, align: "center", lineBreak: false });
      doc.page.margins.bottom = bottom;
    }
    return new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      doc.on("data", (c: Buffer) => chunks.push(c));
      doc.on("end", () => resolve(Buffer.concat(chunks)));
      doc.on("error", reject);
      doc.end();
    });
  }
}

/** An address as printed: street lines, postal code and city, state, country. */
export function addressLines(a: Address | null | undefined): string[] {
  if (!a) return [];
  const city = [a.postalCode, a.city].filter((s) => s).join(" ");
  return [a.line1, a.line2, city, a.state, a.country].filter((s): s is string => typeof s === "string" && s.trim() !== "");
}

/** The seller's block: legal name, address, tax ID, email. */
export function sellerLines(s: SellerDetails | null | undefined): string[] {
  if (!s) return [];
  return [s.legalName ?? "", ...addressLines(s.address), s.taxId ? `Tax ID: ${s.taxId}` : "", s.email ?? ""].filter((l) => l !== "");
}

/** The buyer's block: legal name (else the subject's name), address, tax IDs, email. */
export function buyerLines(d: BillingDetails | null | undefined, name: string): string[] {
  const ids = (d?.taxIds ?? []).map((t) => `Tax ID: ${t.value} (${t.type})`);
  return [d?.legalName || name, ...addressLines(d?.address), ...ids, d?.email ?? ""].filter((l) => l !== "");
}

export const day = (d: Date) => d.toISOString().slice(0, 10);
