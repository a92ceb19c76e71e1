/**
 * The webhook host guard (src/webhooks/guard.ts) and the sender's checks before connecting
 * (src/webhooks/http-sender.ts): every spelling of a loopback, private, link-local or metadata
 * address is refused, judged on the parsed address; public addresses pass; and the sender sends
 * nothing to a receiver on 127.0.0.1 reached through a literal IPv6 spelling (for which Node never
 * calls `lookup`) or through a name that resolves to it.
 */
import test from "ava";
import { addressProblem, hostGuard, isPrivateAddress } from "../../src/webhooks/guard.js";
import { HttpWebhookSender, type Resolver } from "../../src/webhooks/http-sender.js";
import { type Receiver, startReceiver } from "../helpers/receiver.js";
import { ALLOWED_URLS, REFUSED_URLS } from "../helpers/webhook-urls.js";

const strict = hostGuard(false, () => ["billing.example.com"]);
const open = hostGuard(true, () => ["billing.example.com"]);

test(`${REFUSED_URLS.length} spellings of loopback, private, link-local and metadata addresses are refused at save and at connect`, (t) => {
  t.true(REFUSED_URLS.length >= 20);
  for (const raw of REFUSED_URLS) {
    const url = new URL(raw);
    t.truthy(strict.checkUrl(url), `${raw} (${url.hostname}) is refused`);
    const host = url.hostname.replace(/^\[|\]$/g, "");
    // The literal address, as the sender checks it before connecting.
    if (!host.includes("localhost")) t.false(strict.allowsAddress(host), `${raw}: ${host} may not be connected to`);
    t.is(open.checkUrl(url), undefined, `${raw} is allowed with WEBHOOK_ALLOW_PRIVATE_HOSTS=true`);
  }
});

test("public addresses and names are allowed, whatever their spelling", (t) => {
  for (const raw of ALLOWED_URLS) {
    const url = new URL(raw);
    t.is(strict.checkUrl(url), undefined, raw);
    const host = url.hostname.replace(/^\[|\]$/g, "");
    t.true(strict.allowsAddress(host), `${raw}: ${host} may be connected to`);
  }
});

test("this service's own host is refused with or without a trailing dot or port", (t) => {
  for (const raw of ["https://billing.example.com/hook", "https://BILLING.example.com./hook", "http://billing.example.com:8443/"]) t.truthy(strict.checkUrl(new URL(raw)), raw);
  const ownIp = hostGuard(false, () => ["203.0.113.5:8080", "203.0.113.5"]);
  t.truthy(ownIp.checkUrl(new URL("http://[::ffff:203.0.113.5]:8080/")));
});

test("resolved addresses are judged as parsed, in every form a resolver returns them", (t) => {
  for (const ip of ["127.0.0.1", "::1", "::ffff:127.0.0.1", "::ffff:7f00:1", "::ffff:169.254.169.254", "10.1.2.3", "fe80::1%eth0", "0.0.0.0", "100.100.100.200", "[::ffff:192.168.0.1]"]) {
    t.true(isPrivateAddress(ip), ip);
  }
  for (const ip of ["8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "not-an-address"]) t.false(isPrivateAddress(ip), ip);
  t.is(addressProblem("::ffff:169.254.169.254"), "link-local (IPv4-mapped 169.254.169.254)");
  t.is(addressProblem("2001:0:4136:e378:8000:63bf:80ff:fffe"), "loopback (Teredo client 127.0.0.1)");
  t.is(addressProblem("64:ff9b::a9fe:a9fe"), "link-local (NAT64 169.254.169.254)");
});

// The sender against a real receiver on 127.0.0.1.
let receiver: Receiver;
test.before(async () => {
  receiver = await startReceiver();
});
test.after.always(async () => {
  await receiver?.close();
});

const post = (sender: HttpWebhookSender, url: string) => sender.send({ url, headers: { "content-type": "application/json" }, body: "{}", timeoutMs: 5000 });
const port = () => new URL(receiver.url).port;
/** Every name resolves to the given addresses. */
const resolvingTo =
  (...addresses: string[]): Resolver =>
  (_name, _options, callback) =>
    callback(
      null,
      addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 })),
    );

test.serial("the sender connects to no literal loopback address, however spelled, and says why in the attempt's error", async (t) => {
  const sender = new HttpWebhookSender(strict);
  try {
    const before = receiver.received.length;
    for (const host of ["127.0.0.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]", "2130706433", "0x7f.1", "127.1"]) {
      const res = await post(sender, `http://${host}:${port()}/hook`);
      t.is(res.statusCode, null, host);
      t.is(res.excerpt, null, host);
      t.regex(res.error ?? "", /^not sent: .*loopback/, host);
    }
    t.is(receiver.received.length, before, "the receiver saw no request");
  } finally {
    sender.close();
  }
});

test.serial("the sender connects to no name that resolves to a private address, even among public ones", async (t) => {
  const sender = new HttpWebhookSender(strict, resolvingTo("127.0.0.1"));
  const mixed = new HttpWebhookSender(strict, resolvingTo("93.184.215.14", "::ffff:127.0.0.1"));
  try {
    const before = receiver.received.length;
    const res = await post(sender, `http://hooks.example.org:${port()}/hook`);
    t.is(res.statusCode, null);
    t.is(res.excerpt, null);
    t.is(res.error, "not sent: hooks.example.org resolves to 127.0.0.1 (loopback), an address webhooks may not reach (WEBHOOK_ALLOW_PRIVATE_HOSTS=true allows it)");
    const res2 = await post(mixed, `http://hooks.example.org:${port()}/hook`);
    t.regex(res2.error ?? "", /resolves to ::ffff:127\.0\.0\.1 \(loopback \(IPv4-mapped 127\.0\.0\.1\)\)/);
    t.is(receiver.received.length, before, "the receiver saw no request");
  } finally {
    sender.close();
    mixed.close();
  }
});

test.serial("with WEBHOOK_ALLOW_PRIVATE_HOSTS=true the same spellings and names do reach the receiver", async (t) => {
  const sender = new HttpWebhookSender(open, resolvingTo("127.0.0.1"));
  try {
    const before = receiver.received.length;
    for (const host of ["[::ffff:127.0.0.1]", "127.1", "hooks.example.org"]) {
      const res = await post(sender, `http://${host}:${port()}/hook`);
      t.is(res.statusCode, 200, host);
      t.is(res.excerpt, "ok", host);
    }
    t.is(receiver.received.length, before + 3);
  } finally {
    sender.close();
  }
});
