/** Request bodies of the catalog that billing scenarios build cards from (amounts in cents, USD). */
import type { Json } from "./subjects-api.js";

export const usd = (value: string | number) => ({ amount: { currency_code: "USD", value } });

/** A fixed rate: `seats` at `value` cents by default. */
export const seats = (value: number | string = 1000, code = "seats", name = "Seats") => ({ code, name, price: usd(value) });

/** A simple usage-based rate on `metric`. */
export const simple = (metric: string, price: Json, included = 0, code = "api", name = "API calls") => ({
  usage_based_rate_type: "simple",
  code,
  name,
  pricing_metric_id: metric,
  included_units: included,
  price,
});
