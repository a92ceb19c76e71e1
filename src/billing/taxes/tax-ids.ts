/**
 * Tax IDs of buyers (DESIGN §15): each type's shape, checked after normalizing (spaces and dots
 * removed, upper-cased). Shapes, not registries: a well-formed number may still be unregistered.
 */

/**
 * The shape of each EU member state's VAT number (and XI, Northern Ireland), prefix included:
 * every member state has its own (Greece's prefix is EL).
 */
const EU_VAT: Record<string, RegExp> = {
  AT: /^ATU\d{8}$/,
  BE: /^BE[01]\d{9}$/,
  BG: /^BG\d{9,10}$/,
  CY: /^CY\d{8}[A-Z]$/,
  CZ: /^CZ\d{8,10}$/,
  DE: /^DE\d{9}$/,
  DK: /^DK\d{8}$/,
  EE: /^EE\d{9}$/,
  EL: /^EL\d{9}$/,
  ES: /^ES[A-Z0-9]\d{7}[A-Z0-9]$/,
  FI: /^FI\d{8}$/,
  FR: /^FR[A-HJ-NP-Z0-9]{2}\d{9}$/,
  HR: /^HR\d{11}$/,
  HU: /^HU\d{8}$/,
  IE: /^IE(\d{7}[A-W][A-IW]?|\d[A-Z+*]\d{5}[A-W])$/,
  IT: /^IT\d{11}$/,
  LT: /^LT(\d{9}|\d{12})$/,
  LU: /^LU\d{8}$/,
  LV: /^LV\d{11}$/,
  MT: /^MT\d{8}$/,
  NL: /^NL\d{9}B\d{2}$/,
  PL: /^PL\d{10}$/,
  PT: /^PT\d{9}$/,
  RO: /^RO\d{2,10}$/,
  SE: /^SE\d{10}01$/,
  SI: /^SI\d{8}$/,
  SK: /^SK\d{10}$/,
  XI: /^XI(\d{9}|\d{12}|GD\d{3}|HA\d{3})$/,
};

/** The 11 weights of the ABN checksum (the first digit less 1; the weighted sum divides by 89). */
const ABN_WEIGHTS = [10, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19];

function validAbn(value: string): boolean {
  if (!/^\d{11}$/.test(value)) return false;
  const digits = [...value].map(Number);
  digits[0] = (digits[0] as number) - 1;
  const total = digits.reduce((s, d, i) => s + d * (ABN_WEIGHTS[i] as number), 0);
  return total % 89 === 0;
}

interface TaxIdType {
  /** What a violation says the value must look like. */
  shape: string;
  valid(value: string): boolean;
}

const shaped = (re: RegExp, shape: string): TaxIdType => ({ shape, valid: (v) => re.test(v) });

export const TAX_ID_TYPES: Record<string, TaxIdType> = {
  eu_vat: {
    shape: "an EU member state prefix and that state's VAT number, e.g. DE123456789",
    valid: (v) => {
      const own = EU_VAT[v.slice(0, 2)];
      return own ? own.test(v) : false;
    },
  },
  gb_vat: shaped(/^GB(\d{9}|\d{12}|GD\d{3}|HA\d{3})$/, "GB and 9 or 12 digits, or GBGD/GBHA and 3 digits"),
  us_ein: shaped(/^\d{2}-\d{7}$/, "NN-NNNNNNN"),
  au_abn: { shape: "11 digits with a valid ABN checksum", valid: validAbn },
  ch_vat: shaped(/^CHE-?\d{9}(MWST|TVA|IVA)?$/, "CHE-123.456.789 with an optional MWST, TVA or IVA"),
  no_vat: shaped(/^(NO)?\d{9}(MVA)?$/, "9 digits with an optional MVA, e.g. 123456789MVA"),
  ca_bn: shaped(/^\d{9}([A-Z]{2}\d{4})?$/, "9 digits, optionally with a program account, e.g. 123456789RT0001"),
  in_gst: shaped(/^\d{2}[A-Z]{5}\d{4}[A-Z][1-9A-Z]Z[0-9A-Z]$/, "15 characters, e.g. 22AAAAA0000A1Z5"),
  other: { shape: "1 to 64 characters", valid: (v) => v.length >= 1 && v.length <= 64 },
};

/** Spaces (any whitespace) and dots removed, upper-cased. */
export function normalizeTaxId(value: string): string {
  return value.replace(/[\s.]/g, "").toUpperCase();
}

/** Why `value` (normalized) is not a tax ID of `type`, or undefined when it is. */
export function taxIdProblem(type: string, value: string): string | undefined {
  const t = TAX_ID_TYPES[type];
  if (!t) return undefined;
  if (value === "") return "is required";
  if (value.length > 64) return "must have at most 64 characters";
  if (type === "eu_vat" && !(value.slice(0, 2) in EU_VAT)) {
    return `must start with an EU member state prefix (${Object.keys(EU_VAT).join(", ")})`;
  }
  return t.valid(value) ? undefined : `must be ${t.shape}`;
}
