/**
 * What discounts do to invoices (DESIGN §15), through the REST API on test clocks, on MariaDB and
 * SQLite. The plan bills base 1000 (and add-on 500) USD cents a month in advance, from Jan 15: an
 * invoice at Jan 15, Feb 15, Mar 15, Apr 15. An invoice reads [total, total_discount, [coupon
 * name, amount]]; every number is worked out in the comment beside it.
 */
import test from "ava";
import { APR, FEB, JAN, MAR, coupon, discounted, plan, subscribe, usd } from "../helpers/coupon-bodies.js";
import { STORES } from "../helpers/db.js";
import { Scenario } from "../helpers/scenario.js";
import { useServer } from "../helpers/server.js";
import type { Json } from "../helpers/subjects-api.js";

for (const store of STORES) {
  const server = useServer(store);

  test(`${store}: coupon_id on create discounts the first invoice (through a checkout, and with a card on file)`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const card = await plan(s);
    const forever = await coupon(s, { name: "Forever 20%", percent_off: "20", duration: "forever" });
    const first = await subscribe(s, card, { coupon_id: forever.id });
    // A card is on file now: the second subscription starts at once, its coupon in the same transaction.
    const flat = await coupon(s, { name: "300 off", amount_off: usd(300) });
    const second = await subscribe(s, card, { coupon_id: flat.id });
    t.deepEqual(await discounted(s), [
      ["800", "200", [["Forever 20%", "200"]]], // 1000 − 20%
      ["700", "300", [["300 off", "300"]]], // 1000 − 300
    ]);
    t.deepEqual(
      (await s.call("GET", `/discounts?subscription_id=${first}`)).discounts.map((d: Json) => [d.status, d.invoices_discounted]),
      [["active", 1]],
    );
    t.deepEqual(
      (await s.call("GET", `/discounts?subscription_id=${second}`)).discounts.map((d: Json) => [d.status, d.invoices_discounted]),
      [["ended", 1]],
    );
    await s.advance(FEB);
    // Feb's two invoices (one cycle close writes both, in either order), first's then second's.
    const feb = (await s.invoices()).slice(2).map((i: Json) => [i.subscription_id, i.total_amount.value, i.total_discount.value]);
    t.deepEqual(
      [first, second].map((id) => feb.find((x: Json) => x[0] === id)),
      [
        [first, "800", "200"], // forever
        [second, "1000", "0"], // once: used up
      ],
    );
  });

  test(`${store}: once discounts one invoice; repeating for 2 months two; forever every one`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const card = await plan(s);
    const once = await coupon(s, { name: "Once 25%", percent_off: "25" });
    await subscribe(s, card, { coupon_id: once.id });
    await s.advance(FEB);
    t.deepEqual(await discounted(s), [
      ["750", "250", [["Once 25%", "250"]]],
      ["1000", "0", []],
    ]);

    const r = await Scenario.start(server, JAN);
    const rep = await coupon(r, { name: "Two months 10%", percent_off: "10", duration: "repeating", duration_in_months: 2 });
    await subscribe(r, await plan(r), { coupon_id: rep.id });
    await r.advance(MAR);
    // Jan 15 and Feb 15 are before the end (Mar 15); Mar 15 is not.
    t.deepEqual(await discounted(r), [
      ["900", "100", [["Two months 10%", "100"]]],
      ["900", "100", [["Two months 10%", "100"]]],
      ["1000", "0", []],
    ]);
    t.deepEqual(
      (await r.call("GET", `/discounts?subject_id=${r.subjectId}`)).discounts.map((d: Json) => [d.status, d.invoices_discounted, d.end]),
      [["ended", 2, MAR]],
    );

    const f = await Scenario.start(server, JAN);
    const forever = await coupon(f, { name: "Always 5.5%", percent_off: "5.5", duration: "forever" });
    await subscribe(f, await plan(f), { coupon_id: forever.id });
    await f.advance(APR);
    t.deepEqual(
      (await discounted(f)).map(([total]) => total),
      ["945", "945", "945", "945"], // 1000 − 55
    );
  });

  test(`${store}: an amount is capped at the invoice; rate codes limit the lines discounted`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const sub = await subscribe(s, await plan(s, true), {}, true);
    const big = await coupon(s, { name: "5000 off", amount_off: usd(5000) });
    const addon = await coupon(s, { name: "Half the add-on", percent_off: "50", duration: "forever", applies_to_rate_codes: ["addon"] });
    await s.call("POST", `/subscriptions/${sub}/discounts`, { coupon_id: addon.id });
    await s.call("POST", `/subscriptions/${sub}/discounts`, { coupon_id: big.id });
    await s.advance(FEB);
    const invoices = await s.invoices();
    // Feb: the add-on's 500 − 50% = 250 off; then 5000 off the 1250 left is capped at 1250.
    t.deepEqual((await discounted(s)).slice(1), [
      [
        "0",
        "1500",
        [
          ["Half the add-on", "250"],
          ["5000 off", "1250"],
        ],
      ],
    ]);
    const lines = invoices[1].line_items.map((l: Json) => [l.description, l.discount_amounts.map((d: Json) => [d.name, d.amount.value])]);
    t.deepEqual(lines, [
      ["Base", [["5000 off", "1000"]]],
      [
        "Add-on",
        [
          ["Half the add-on", "250"],
          ["5000 off", "250"],
        ],
      ],
    ]);
    await s.advance(MAR);
    t.deepEqual((await discounted(s)).slice(2), [["1250", "250", [["Half the add-on", "250"]]]]);
  });

  test(`${store}: a subject's discount covers each of its subscriptions; a removed discount stops`, async (t) => {
    const s = await Scenario.start(server, JAN);
    const card = await plan(s);
    const a = await subscribe(s, card);
    const b = await subscribe(s, card);
    const subjectWide = await coupon(s, { name: "100 off", amount_off: usd(100), duration: "forever" });
    const d = await s.call("POST", `/subjects/${s.subjectId}/discounts`, { coupon_id: subjectWide.id });
    const own = await coupon(s, { name: "10%", percent_off: "10", duration: "forever" });
    await s.call("POST", `/subscriptions/${a}/discounts`, { coupon_id: own.id });
    await s.advance(FEB);
    const feb = (await s.invoices()).slice(2).map((i: Json) => [i.subscription_id, i.total_amount.value, i.discounts.map((x: Json) => x.name)]);
    // a: its own 10% first (100), then the subject's 100; b: the subject's 100.
    t.deepEqual(
      feb.sort((x: Json, y: Json) => (x[0] === a ? -1 : y[0] === a ? 1 : 0)),
      [
        [a, "800", ["10%", "100 off"]],
        [b, "900", ["100 off"]],
      ],
    );
    await s.call("DELETE", `/discounts/${d.id}`);
    await s.advance(MAR);
    const mar = (await s.invoices()).slice(4).map((i: Json) => [i.subscription_id, i.total_amount.value]);
    t.deepEqual(
      mar.sort((x: Json, y: Json) => (x[0] === a ? -1 : y[0] === a ? 1 : 0)),
      [
        [a, "900"],
        [b, "1000"],
      ],
    );
  });
}
