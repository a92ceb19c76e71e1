/**
 * Coupons and discounts through the REST API (DESIGN §15), on MariaDB and SQLite: create, get,
 * list (archived filter) and archive coupons; every validation error with its field path;
 * applying a coupon to a subscription and to a subject, listing and removing discounts; the
 * refusals (archived, past redeem_by, fully redeemed, another currency, a cancelled
 * subscription); the `coupon.redeemed` event; the same service on Connect, gRPC and gRPC-Web;
 * an Idempotency-Key replay of a redemption. What discounts do to invoices is in
 * coupons-invoices.test.ts. Amounts in USD cents.
 */
import test from "ava";
import type { ConnectError } from "@connectrpc/connect";
import { CouponService } from "../../src/gen/billing/v1/coupon_service_pb.js";
import { PROTOCOLS, rpcClient, violatedFields } from "../helpers/clients.js";
import { JAN, coupon, plan, refused, subscribe, usd } from "../helpers/coupon-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: create, get, list with the archived filter, archive`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const pct = await coupon(s, { name: "Launch 20%", percent_off: "20.5", metadata: { k: "v" } });
    t.regex(pct.id, /^cpn_[0-9A-Za-z]{22}$/);
    t.like(pct, {
      name: "Launch 20%",
      percent_off: "20.5",
      amount_off: null,
      duration: "once",
      duration_in_months: null,
      max_redemptions: null,
      redeem_by: null,
      applies_to_rate_codes: [],
      times_redeemed: 0,
      valid: true,
      archived: false,
      metadata: { k: "v" },
    });
    t.deepEqual(await s.call("GET", `/coupons/${pct.id}`), pct);
    const amt = await coupon(s, {
      amount_off: { currency_code: "usd", value: "500" },
      duration: "repeating",
      duration_in_months: 3,
      max_redemptions: 2,
      redeem_by: "2030-01-01T00:00:00Z",
      applies_to_rate_codes: ["base"],
    });
    t.like(amt, { percent_off: null, amount_off: usd(500), duration: "repeating", duration_in_months: 3, max_redemptions: 2, redeem_by: "2030-01-01T00:00:00Z", applies_to_rate_codes: ["base"] });
    t.deepEqual(
      (await s.call("GET", "/coupons")).coupons.map((c: Json) => c.id),
      [pct.id, amt.id],
    );
    const archived = await s.call("POST", `/coupons/${pct.id}/archive`, {});
    t.like(archived, { id: pct.id, archived: true, valid: false });
    t.deepEqual(
      (await s.call("GET", "/coupons?archived=true")).coupons.map((c: Json) => c.id),
      [pct.id],
    );
    t.deepEqual(
      (await s.call("GET", "/coupons?archived=false")).coupons.map((c: Json) => c.id),
      [amt.id],
    );
    const page = await s.call("GET", "/coupons?limit=1");
    t.true(page.has_more);
    t.is((await s.raw("GET", "/coupons/cpn_nope")).status, 404);
    t.is((await s.raw("POST", "/coupons/cpn_nope/archive", {})).status, 404);
  });

  test(`${store}: every invalid field is a 400 naming its path, and nothing is created`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const cases: [Json, string[]][] = [
      [{ name: "" }, ["name"]],
      [{ name: "x".repeat(101) }, ["name"]],
      [{ percent_off: undefined }, ["percent_off"]],
      [{ percent_off: "10", amount_off: usd(100) }, ["percent_off"]],
      [{ percent_off: "0" }, ["percent_off"]],
      [{ percent_off: "100.01" }, ["percent_off"]],
      [{ percent_off: "12.34567" }, ["percent_off"]],
      [{ percent_off: undefined, amount_off: { currency_code: "XYZ", value: "100" } }, ["amount_off.currency_code"]],
      [{ percent_off: undefined, amount_off: usd("0") }, ["amount_off.value"]],
      [{ percent_off: undefined, amount_off: usd("1.5") }, ["amount_off.value"]],
      [{ duration: "" }, ["duration"]],
      [{ duration: "weekly" }, ["duration"]],
      [{ duration: "repeating" }, ["duration_in_months"]],
      [{ duration: "repeating", duration_in_months: 121 }, ["duration_in_months"]],
      [{ duration: "repeating", duration_in_months: 0 }, ["duration_in_months"]],
      [{ duration: "forever", duration_in_months: 3 }, ["duration_in_months"]],
      [{ max_redemptions: 0 }, ["max_redemptions"]],
      [{ applies_to_rate_codes: ["a", "a"] }, ["applies_to_rate_codes[1]"]],
      [{ applies_to_rate_codes: [""] }, ["applies_to_rate_codes[0]"]],
    ];
    for (const [over, fields] of cases) {
      // A valid percent coupon but for `over` (undefined leaves a field out).
      const r = await s.raw("POST", "/coupons", { name: "Promo", duration: "once", percent_off: "10", ...over });
      t.deepEqual([r.status, violatedFields(r.body as Json)], [400, fields], JSON.stringify(over));
    }
    t.deepEqual((await s.call("GET", "/coupons")).coupons, []);
  });

  test(`${store}: applied to a subscription and to a subject; listed; removed once; coupon.redeemed events`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const sub = await subscribe(s, await plan(s));
    const c = await coupon(s, { percent_off: "10", duration: "forever" });
    const d = await s.call("POST", `/subscriptions/${sub}/discounts`, { coupon_id: c.id });
    t.regex(d.id, /^di_[0-9A-Za-z]{22}$/);
    t.like(d, { coupon_id: c.id, subscription_id: sub, subject_id: s.subjectId, start: JAN, end: null, status: "active", invoices_discounted: 0, removed_at: null });
    t.like(d.coupon, { id: c.id, times_redeemed: 1 });
    const rep = await coupon(s, { amount_off: usd(100), duration: "repeating", duration_in_months: 2 });
    const ds = await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: rep.id });
    t.like(ds, { subscription_id: null, subject_id: s.subjectId, start: JAN, end: "2026-03-15T00:00:00Z", status: "active" });
    t.deepEqual(
      (await s.call("GET", `/discounts?subject_id=${s.subjectId}`)).discounts.map((x: Json) => x.id),
      [d.id, ds.id],
    );
    t.deepEqual(
      (await s.call("GET", `/discounts?subscription_id=${sub}`)).discounts.map((x: Json) => x.id),
      [d.id],
    );
    const neither = await s.raw("GET", "/discounts");
    t.deepEqual([neither.status, violatedFields(neither.body as Json)], [400, ["subscription_id"]]);
    t.is((await s.raw("GET", "/discounts?subscription_id=sub_nope")).status, 404);
    t.is((await s.raw("POST", `/subscriptions/${sub}/discounts`, { coupon_id: "cpn_nope" })).status, 404);
    t.is((await s.raw("POST", "/subscriptions/sub_nope/discounts", { coupon_id: c.id })).status, 404);
    const removed = await s.call("DELETE", `/discounts/${d.id}`);
    t.like(removed, { id: d.id, status: "removed", removed_at: JAN });
    t.deepEqual(await refused(s, "DELETE", `/discounts/${d.id}`), [400, "DISCOUNT_REMOVED"]);
    t.is((await s.raw("DELETE", "/discounts/di_nope")).status, 404);
    const events = (await s.call("GET", "/events?limit=100")).events.filter((e: Json) => e.type === "coupon.redeemed");
    t.deepEqual(
      events.map((e: Json) => e.data.id),
      [d.id, ds.id],
    );
    t.like(events[0].data, { coupon_id: c.id, subscription_id: sub, status: "active", coupon: { id: c.id, times_redeemed: 1 } });
  });

  test(`${store}: refusals: archived, past redeem_by, fully redeemed, another currency, a cancelled subscription`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const card = await plan(s);
    const sub = await subscribe(s, card);
    const path = `/subscriptions/${sub}/discounts`;
    const archived = await coupon(s, { percent_off: "10" });
    await s.call("POST", `/coupons/${archived.id}/archive`, {});
    t.deepEqual(await refused(s, "POST", path, { coupon_id: archived.id }), [400, "COUPON_ARCHIVED"]);
    const expired = await coupon(s, { percent_off: "10", redeem_by: "2026-01-14T00:00:00Z" });
    t.deepEqual(await refused(s, "POST", path, { coupon_id: expired.id }), [400, "COUPON_EXPIRED"]);
    const once = await coupon(s, { percent_off: "10", max_redemptions: 1 });
    await s.call("POST", path, { coupon_id: once.id });
    t.deepEqual(await refused(s, "POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: once.id }), [400, "COUPON_MAX_REDEMPTIONS"]);
    t.like(await s.call("GET", `/coupons/${once.id}`), { times_redeemed: 1, valid: false });
    const eur = await coupon(s, { amount_off: { currency_code: "EUR", value: "100" } });
    t.deepEqual(await refused(s, "POST", path, { coupon_id: eur.id }), [400, "CURRENCY_MISMATCH"]);
    // On create: refused before anything is written.
    const before = (await s.subscriptions()).length;
    t.deepEqual(await refused(s, "POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { base: 1 }, coupon_id: archived.id }), [400, "COUPON_ARCHIVED"]);
    t.is((await s.raw("POST", "/subscriptions", { subject_id: s.subjectId, rate_card_id: card, fixed_rate_quantities: { base: 1 }, coupon_id: "cpn_nope" })).status, 404);
    t.is((await s.subscriptions()).length, before);
    await s.call("POST", `/subscriptions/${sub}/cancel`, {});
    const fine = await coupon(s, { percent_off: "10" });
    t.deepEqual(await refused(s, "POST", path, { coupon_id: fine.id }), [400, "SUBSCRIPTION_NOT_ACTIVE"]);
    t.is((await s.call("GET", `/coupons/${fine.id}`)).times_redeemed, 0);
  });

  test(`${store}: Connect, gRPC and gRPC-Web serve the same coupons, discounts and errors`, async (t) => {
    const s = await Scenario.start(server, JAN);
    for (const protocol of PROTOCOLS) {
      const client = rpcClient(CouponService, server.url, protocol, s.key);
      const made = await client.createCoupon({ name: protocol, percentOff: "15", duration: "forever" });
      t.like(made.coupon, { name: protocol, percentOff: "15", valid: true }, protocol);
      const applied = await client.addSubjectDiscount({ subjectId: s.subjectId, couponId: made.coupon?.id ?? "" });
      t.like(applied.discount, { subjectId: s.subjectId, status: "active", coupon: { timesRedeemed: 1 } }, protocol);
      const err = await t.throwsAsync(client.createCoupon({ name: "", percentOff: "15", duration: "once" }));
      t.regex((err as ConnectError).rawMessage, /name/, protocol);
    }
    t.is((await s.call("GET", `/discounts?subject_id=${s.subjectId}`)).discounts.length, PROTOCOLS.length);
  });

  test(`${store}: a redemption replayed with its Idempotency-Key makes one discount`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const c = await coupon(s, { percent_off: "10", max_redemptions: 5 });
    const send = () =>
      fetch(`${server.url}/subjects/${s.subjectId}/discounts`, {
        method: "POST",
        headers: { "x-api-key": s.key, "content-type": "application/json", "idempotency-key": "redeem-once" },
        body: JSON.stringify({ coupon_id: c.id }),
      });
    const first = await (await send()).json();
    const second = await (await send()).json();
    t.deepEqual(second, first);
    t.is((await s.call("GET", `/coupons/${c.id}`)).times_redeemed, 1);
  });
}
