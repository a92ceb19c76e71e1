/**
 * Which hosts webhooks may reach. By default not this service's own host (PUBLIC_BASE_URL's),
 * `localhost`, and no address outside the public unicast space: loopback, private, link-local
 * (cloud metadata), CGNAT, unspecified, multicast, broadcast, reserved and documentation ranges,
 * unique-local and site-local IPv6, and every IPv6 form that carries such an IPv4 address
 * (IPv4-mapped, IPv4-compatible, NAT64, 6to4, Teredo). The decision is taken on the parsed address
 * (ipaddr.js), never on its spelling. An endpoint URL must not turn the service into a way into
 * its own network. WEBHOOK_ALLOW_PRIVATE_HOSTS=true lifts the rule (a receiver on the same machine
 * or network, tests). Checked when an endpoint is saved (its literal host) and again before every
 * connection: the literal host itself (Node skips a custom `lookup` for an IP literal) and every
 * address a name resolves to.
 */
import ipaddr from "ipaddr.js";

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** The address `text` spells (brackets, a zone id and legacy IPv4 spellings allowed), if any. */
function parseAddress(text: string): Address | undefined {
  const bare = text.replace(/^\[|\]$/g, "");
  return ipaddr.isValid(bare) ? ipaddr.parse(bare) : undefined;
}

function v4FromParts(hi: number, lo: number): ipaddr.IPv4 {
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}

/** ipaddr.js's range names as the attempt log shows them. */
const RANGE_NAMES: Record<string, string> = {
  linkLocal: "link-local",
  carrierGradeNat: "CGNAT",
  uniqueLocal: "unique-local",
  deprecatedSiteLocal: "site-local",
  ipv4Mapped: "IPv4-mapped",
  rfc6145: "IPv4-translated",
  rfc6052: "NAT64",
};
const rangeName = (range: string) => RANGE_NAMES[range] ?? range;

/** Why an IPv4 address may not be reached (its range's name), or undefined for public unicast. */
function v4Problem(a: ipaddr.IPv4): string | undefined {
  const range = a.range();
  return range === "unicast" ? undefined : rangeName(range);
}

/** Why an IPv6 address may not be reached, judging any IPv4 address it embeds as well. */
function v6Problem(a: ipaddr.IPv6): string | undefined {
  const p = a.parts as number[];
  const at = (i: number) => p[i] ?? 0;
  const embedded = (kind: string, v4: ipaddr.IPv4) => {
    const why = v4Problem(v4);
    return why ? `${why} (${kind} ${v4.toString()})` : undefined;
  };
  const range = a.range();
  switch (range) {
    case "ipv4Mapped": // ::ffff:a.b.c.d
    case "rfc6145": // ::ffff:0:a.b.c.d (SIIT)
      return embedded(rangeName(range), v4FromParts(at(6), at(7)));
    case "rfc6052":
      // 64:ff9b::/96 carries the IPv4 address in its last 32 bits; the local-use 64:ff9b:1::/48
      // places it by a prefix length this service cannot know, and is never a public address.
      if (at(2) === 0 && at(3) === 0 && at(4) === 0 && at(5) === 0) return embedded("NAT64", v4FromParts(at(6), at(7)));
      return "local-use NAT64";
    case "6to4": // 2002:AABB:CCDD::/48 is the 6to4 site of AA.BB.CC.DD
      return embedded("6to4", v4FromParts(at(1), at(2)));
    case "teredo": // 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC, the client's address inverted
      return embedded("Teredo server", v4FromParts(at(2), at(3))) ?? embedded("Teredo client", v4FromParts(at(6) ^ 0xffff, at(7) ^ 0xffff));
    case "unicast":
      // ::a.b.c.d (IPv4-compatible, deprecated) and everything outside 2000::/3, the only global
      // unicast space allocated (site-local fec0::/10 and the rest of the unassigned space).
      if (p.slice(0, 6).every((x) => x === 0)) return `IPv4-compatible (${v4FromParts(at(6), at(7)).toString()})`;
      if ((at(0) & 0xe000) !== 0x2000) return "not global unicast";
      return undefined;
    default:
      return rangeName(range);
  }
}

/**
 * Why an IP address (v4 or v6, in any spelling ipaddr.js reads) may not be reached by webhooks, as
 * the name of its range ("loopback", "private", "link-local (IPv4-mapped 169.254.169.254)", …);
 * undefined when it is a public address, or when `ip` is not an address at all.
 */
export function addressProblem(ip: string): string | undefined {
  const a = parseAddress(ip);
  if (!a) return undefined;
  return a.kind() === "ipv4" ? v4Problem(a as ipaddr.IPv4) : v6Problem(a as ipaddr.IPv6);
}

/** Whether an IP address (v4 or v6) is one webhooks must not reach. */
export function isPrivateAddress(ip: string): boolean {
  return addressProblem(ip) !== undefined;
}

/**
 * A host as compared with this service's own: lowercase, without brackets or trailing dots, and
 * an address in its canonical form (an IPv4-mapped IPv6 address as its IPv4 address).
 */
function canonicalHost(host: string): string {
  const h = host
    .toLowerCase()
    .replace(/^\[|\]$/g, "")
    .replace(/\.+$/, "");
  const a = parseAddress(h);
  if (!a) return h;
  return a.kind() === "ipv6" && (a as ipaddr.IPv6).isIPv4MappedAddress() ? (a as ipaddr.IPv6).toIPv4Address().toString() : a.toString();
}

export interface HostGuard {
  /** Why `url` may not receive webhooks, judged from its literal host; undefined when it may. */
  checkUrl(url: URL): string | undefined;
  /** Whether a resolved address may be connected to. */
  allowsAddress(ip: string): boolean;
}

export function hostGuard(allowPrivate: boolean, ownHosts: () => string[]): HostGuard {
  return {
    checkUrl(url) {
      if (allowPrivate) return undefined;
      const host = canonicalHost(url.hostname);
      const why = "must not point at this service's own host or a private, loopback or link-local address (WEBHOOK_ALLOW_PRIVATE_HOSTS=true allows it)";
      const own = ownHosts().map(canonicalHost);
      if (own.includes(host) || own.includes(url.host.toLowerCase()) || host === "localhost" || host.endsWith(".localhost")) return why;
      if (isPrivateAddress(host)) return why;
      return undefined;
    },
    allowsAddress(ip) {
      return allowPrivate || !isPrivateAddress(ip);
    },
  };
}
