/**
 * Resuming paused subscriptions when their `resumes_at` comes, in memory (the real use cases over
 * the fakes, test/fakes): an unexpected failure is reported (to be logged) and the subscription is
 * tried again on the next run; a subscription resumed meanwhile is not reported.
 */
import test from "ava";
import { fixedRate, world } from "../fakes/world.js";

const T0 = new Date("2026-03-10T12:00:00Z");
const RESUME = new Date("2026-03-20T00:00:00Z");

test("a resume that fails unexpectedly is reported and tried again on the next run", async (t) => {
  const w = world(T0);
  w.card("card_a", [fixedRate("base", "10")]);
  w.subject("subj_a", "succeeds");
  const s = await w.subscribe("subj_a", "card_a", { base: "1" });
  await w.pauses.pause(w.caller, s.id, { resumesAt: RESUME });
  const reported: { id: string; err: unknown }[] = [];
  w.engine.events.resumeFailed = (id, err) => reported.push({ id, err });

  const lookup = w.stores.directory.subject;
  w.stores.directory.subject = async () => {
    throw new Error("connection lost");
  };
  w.moveTo(RESUME);
  t.is(await w.pauses.resumeDue(RESUME, null), 0);
  t.is(reported.length, 1);
  t.is(reported[0].id, s.id);
  t.is((reported[0].err as Error).message, "connection lost");

  w.stores.directory.subject = lookup;
  t.is(await w.pauses.resumeDue(RESUME, null), 1);
  t.is(await w.pauses.resumeDue(RESUME, null), 0, "resumed once");
  t.is(reported.length, 1, "a successful run reports nothing");
});
